// Package email is an alert sink that sends notices by email, over SMTP
// with STARTTLS and, given a username, AUTH PLAIN. It lives apart from
// package alert so that only programs that send mail build a mail library.
//
// Each notice is one message whose Message-ID is made of the notice's
// event ID, and which carries it in the X-Sheaf-Event-Id header: a notice
// sent again after a failure is the same message to a mail system that
// drops duplicates by Message-ID.
package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/sheaf-dev/sheaf/queue/alert"
)

// ErrInvalid is wrapped by errors about a Sink's fields.
var ErrInvalid = errors.New("email: invalid")

// Defaults of a Sink.
const (
	DefaultPort    = 587
	DefaultTimeout = 30 * time.Second
)

// Sink sends each notice as a plain-text message from From to To through
// the SMTP server at Host. It always uses STARTTLS, and fails against a
// server that does not offer it. Zero fields take their defaults.
type Sink struct {
	Host string
	// Port is the server's submission port. Default DefaultPort.
	Port int
	// Username and Password authenticate with AUTH PLAIN; no Username: no
	// authentication.
	Username, Password string
	From               string
	To                 []string
	// Timeout bounds the connection and each command. Default
	// DefaultTimeout.
	Timeout time.Duration
	// TLSConfig configures STARTTLS; nil: the system's roots, and Host as
	// the server's name.
	TLSConfig *tls.Config
}

// Send sends n as one message.
func (s *Sink) Send(ctx context.Context, n alert.Notice) error {
	if s.Host == "" || s.From == "" || len(s.To) == 0 {
		return fmt.Errorf("%w: a sink needs a Host, a From and a To", ErrInvalid)
	}
	m := mail.NewMsg()
	if err := m.From(s.From); err != nil {
		return fmt.Errorf("%w: From: %w", ErrInvalid, err)
	}
	if err := m.To(s.To...); err != nil {
		return fmt.Errorf("%w: To: %w", ErrInvalid, err)
	}
	m.Subject(Subject(n))
	m.SetMessageIDWithValue(n.EventID + "@sheaf")
	m.SetGenHeader(mail.Header(alert.EventIDHeader), n.EventID)
	m.SetDate()
	m.SetBodyString(mail.TypeTextPlain, Body(n))

	port, timeout, tc := s.Port, s.Timeout, s.TLSConfig
	if port == 0 {
		port = DefaultPort
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if tc == nil {
		tc = &tls.Config{ServerName: s.Host, MinVersion: tls.VersionTLS12}
	}
	opts := []mail.Option{mail.WithPort(port), mail.WithTimeout(timeout), mail.WithTLSPolicy(mail.TLSMandatory),
		mail.WithTLSConfig(tc)}
	if s.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(s.Username), mail.WithPassword(s.Password))
	}
	c, err := mail.NewClient(s.Host, opts...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		return fmt.Errorf("email: send to %s: %w", s.Host, err)
	}
	return nil
}

// Subject is a notice's subject line: "[sheaf] FIRING dead: job 3 …".
func Subject(n alert.Notice) string {
	what := n.Rule
	if n.Type == alert.TypeDigest {
		what = "digest"
	}
	return fmt.Sprintf("[sheaf] %s %s: %s", strings.ToUpper(n.Type), what, n.Summary)
}

// Body is a notice's message text.
func Body(n alert.Notice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", n.Summary)
	if n.Text != "" {
		fmt.Fprintf(&b, "%s\n", n.Text)
	}
	fmt.Fprintf(&b, "Rule: %s\nKey: %s\n", n.Rule, n.Key)
	if n.Kind != "" {
		fmt.Fprintf(&b, "Kind: %s\n", n.Kind)
	}
	if n.Queue != "" {
		fmt.Fprintf(&b, "Queue: %s\n", n.Queue)
	}
	fmt.Fprintf(&b, "Since: %s\nAt: %s\nEvent: %s\n", n.StartedAt.Format(time.RFC3339), n.At.Format(time.RFC3339), n.EventID)
	return b.String()
}
