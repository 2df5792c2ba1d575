package email_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/alert"
	"github.com/sheaf-dev/sheaf/queue/alert/email"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// mailbox is an SMTP server's store: what it accepted, from whom.
type mailbox struct {
	mu    sync.Mutex
	mails []mailRecord
}

type mailRecord struct {
	user, from string
	to         []string
	data       string
	tls        bool
}

// session is one SMTP session; it wants AUTH PLAIN as user "ops",
// password "pw", before MAIL.
type session struct {
	box  *mailbox
	conn *smtp.Conn
	rec  mailRecord
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "ops" || pass != "pw" {
			return errors.New("bad credentials")
		}
		s.rec.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.rec.user == "" {
		return smtp.ErrAuthRequired
	}
	s.rec.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rec.to = append(s.rec.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, s.rec.tls = s.conn.TLSConnectionState()
	s.rec.data = string(b)
	s.box.mu.Lock()
	s.box.mails = append(s.box.mails, s.rec)
	s.box.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.rec.from, s.rec.to = "", nil }
func (s *session) Logout() error { return nil }

// serve starts an SMTP server with STARTTLS on a self-signed certificate
// and returns its port and the pool that trusts it.
func serve(t *testing.T, box *mailbox) (int, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)

	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{box: box, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	srv.ReadTimeout, srv.WriteTimeout = 5*time.Second, 5*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return l.Addr().(*net.TCPAddr).Port, pool
}

// The sink sends a notice over STARTTLS with AUTH PLAIN, its event ID in
// the Message-ID and a header; wrong credentials and a server without
// TLS fail with errors.
func TestSendsOverSTARTTLSWithAuth(t *testing.T) {
	box := &mailbox{}
	port, pool := serve(t, box)
	sink := &email.Sink{Host: "localhost", Port: port, Username: "ops", Password: "pw", From: "sheaf@example.com",
		To: []string{"oncall@example.com"}, Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}
	n := alert.Notice{EventID: "0f3a", Type: alert.TypeFiring, Rule: "dead", Key: "job 7", Kind: "report",
		Summary: "job 7 (report) failed for good", StartedAt: time.Now(), At: time.Now()}
	require.NoError(t, sink.Send(context.Background(), n))
	box.mu.Lock()
	require.Len(t, box.mails, 1)
	m := box.mails[0]
	box.mu.Unlock()
	require.True(t, m.tls)
	require.Equal(t, "ops", m.user)
	require.Equal(t, "sheaf@example.com", m.from)
	require.Equal(t, []string{"oncall@example.com"}, m.to)
	require.Contains(t, m.data, "Subject: [sheaf] FIRING dead: job 7 (report) failed for good")
	require.Contains(t, m.data, "Message-ID: <0f3a@sheaf>")
	require.Contains(t, m.data, "X-Sheaf-Event-Id: 0f3a")
	require.Contains(t, m.data, "Kind: report")

	bad := *sink
	bad.Password = "wrong"
	require.ErrorContains(t, bad.Send(context.Background(), n), "email: send to localhost")
	untrusted := *sink
	untrusted.TLSConfig = nil // the system's roots do not know the certificate
	require.Error(t, untrusted.Send(context.Background(), n))
	box.mu.Lock()
	require.Len(t, box.mails, 1)
	box.mu.Unlock()

	for _, s := range []email.Sink{{}, {Host: "localhost", From: "x", To: []string{"not an address"}}, {Host: "localhost", From: "<>", To: []string{"a@b"}}} {
		require.ErrorIs(t, s.Send(context.Background(), n), email.ErrInvalid, strconv.Quote(s.From))
	}
}
