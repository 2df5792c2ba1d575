package alert_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue/alert"
)

// receiver is a webhook receiver that checks signatures, drops duplicates
// by event ID, and answers 503 to the first tries it is told to.
type receiver struct {
	secret []byte
	mu     sync.Mutex
	refuse int
	tries  int
	bad    int // requests with a wrong signature
	ids    []string
	got    []alert.Notice
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries++
	if !hmac.Equal([]byte(r.Header.Get(alert.SignatureHeader)), []byte(alert.Sign(rc.secret, body))) ||
		r.Header.Get("Content-Type") != "application/json" {
		rc.bad++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rc.ids = append(rc.ids, r.Header.Get(alert.EventIDHeader))
	if rc.refuse > 0 {
		rc.refuse--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var n alert.Notice
	if err := json.Unmarshal(body, &n); err != nil || n.EventID != r.Header.Get(alert.EventIDHeader) {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	rc.got = append(rc.got, n)
}

// The webhook signs the body with the shared secret, sends the event ID
// in a header, and retries a refused try with backoff, under the same ID.
func TestWebhookSignsAndRetries(t *testing.T) {
	t.Parallel()
	rc := &receiver{secret: []byte("s3cret"), refuse: 2}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	e := newEnv(t)
	wh := &alert.Webhook{URL: srv.URL, Secret: rc.secret, Backoff: time.Millisecond, Retries: 2}
	a, err := alert.New(e.client, alert.WithClock(e.clock.now), alert.WithLogger(quiet()), alert.WithSink("hook", wh),
		alert.WithRules(alert.Dead()))
	require.NoError(t, err)
	id := e.enqueue(t)
	e.fail(t, id, "boom")
	run(t, a)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Equal(t, 3, rc.tries)
	require.Zero(t, rc.bad)
	require.Len(t, rc.got, 1)
	require.Equal(t, []string{rc.got[0].EventID, rc.got[0].EventID, rc.got[0].EventID}, rc.ids)
	require.Equal(t, alert.TypeFiring, rc.got[0].Type)
	require.Equal(t, "dead", rc.got[0].Rule)
}

// A receiver with another secret refuses every try: Send fails after its
// retries, and the Alerter keeps the notice to send again.
func TestWebhookFailsWithAWrongSecret(t *testing.T) {
	t.Parallel()
	rc := &receiver{secret: []byte("theirs")}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	wh := &alert.Webhook{URL: srv.URL, Secret: []byte("ours"), Backoff: time.Millisecond, Retries: 1}
	err := wh.Send(context.Background(), alert.Notice{EventID: "e1"})
	require.ErrorContains(t, err, "alert: webhook: "+srv.URL+" answered 401 Unauthorized")
	rc.mu.Lock()
	require.Equal(t, 2, rc.bad)
	rc.mu.Unlock()

	// A try that takes longer than the timeout fails; a cancelled context
	// ends the retries.
	stop := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); slow.Close() })
	wh = &alert.Webhook{URL: slow.URL, Timeout: 10 * time.Millisecond, Retries: -1}
	require.ErrorIs(t, wh.Send(context.Background(), alert.Notice{}), context.DeadlineExceeded)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wh = &alert.Webhook{URL: slow.URL, Backoff: time.Hour}
	require.ErrorIs(t, wh.Send(ctx, alert.Notice{}), context.Canceled)
	wh = &alert.Webhook{URL: "://nowhere"}
	require.ErrorContains(t, wh.Send(ctx, alert.Notice{}), "alert: webhook")
}
