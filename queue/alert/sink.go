package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The types of notices.
const (
	TypeFiring   = "firing"   // an episode began
	TypeResolved = "resolved" // an episode ended
	TypeDigest   = "digest"   // the morning digest
)

// Notice is what a sink is sent: an episode that fired or resolved, or the
// morning digest.
type Notice struct {
	// EventID names the event; a notice sent again (after a failed or
	// interrupted send) carries the same ID, so receivers drop duplicates
	// by it.
	EventID string `json:"event_id"`
	// Type is TypeFiring, TypeResolved or TypeDigest.
	Type string `json:"type"`
	// Rule and Key say what fired: the rule's name and what it fired for
	// (a job, a run, a queue, a schedule; the date of a digest).
	Rule string `json:"rule"`
	Key  string `json:"key"`
	// Kind and Queue are those of what fired, where it has one.
	Kind  string `json:"kind,omitempty"`
	Queue string `json:"queue,omitempty"`
	// Summary says what happened, in a line.
	Summary string `json:"summary"`
	// Text is a digest's review, in lines; empty for other notices.
	Text string `json:"text,omitempty"`
	// EpisodeID is the episode's ID in the database.
	EpisodeID int64 `json:"episode_id"`
	// StartedAt is when the condition was first seen; At when this notice
	// was made (the firing, the resolution, the digest).
	StartedAt time.Time `json:"started_at"`
	At        time.Time `json:"at"`
}

// Sink sends notices somewhere a person sees them. Send is called with
// one notice at a time; an error leaves the notice to be sent again later,
// under the same EventID. Send must return when ctx is done.
type Sink interface {
	Send(ctx context.Context, n Notice) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, n Notice) error

// Send calls f.
func (f SinkFunc) Send(ctx context.Context, n Notice) error { return f(ctx, n) }

// Headers of the requests Webhook sends.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the
	// body, keyed with the webhook's secret.
	SignatureHeader = "X-Sheaf-Signature"
	// EventIDHeader carries the notice's EventID.
	EventIDHeader = "X-Sheaf-Event-Id"
)

// Defaults of Webhook.
const (
	DefaultWebhookTimeout = 10 * time.Second
	DefaultWebhookRetries = 2
	DefaultWebhookBackoff = time.Second
)

// Webhook is a sink that POSTs each notice as JSON to a URL, signed with
// a shared secret (see SignatureHeader and Sign), with the notice's ID in
// EventIDHeader. A response of 2xx is success; anything else, or no
// response within Timeout, is a failed try, retried Retries times, the
// waits doubling from Backoff. Zero fields take their defaults.
type Webhook struct {
	URL    string
	Secret []byte
	// Timeout bounds each try. Default DefaultWebhookTimeout.
	Timeout time.Duration
	// Retries is how many times a failed try is repeated before Send
	// returns the error; negative: none. Default DefaultWebhookRetries.
	Retries int
	// Backoff is the wait before the first retry. Default
	// DefaultWebhookBackoff.
	Backoff time.Duration
	// Client sends the requests; nil: http.DefaultClient.
	Client *http.Client
}

// Sign returns the value of SignatureHeader for body signed with secret;
// a receiver compares it with hmac.Equal.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Send posts n, retrying as w says.
func (w *Webhook) Send(ctx context.Context, n Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("alert: webhook: %w", err)
	}
	retries, backoff := w.Retries, w.Backoff
	if retries == 0 {
		retries = DefaultWebhookRetries
	}
	if backoff <= 0 {
		backoff = DefaultWebhookBackoff
	}
	for try := 0; ; try++ {
		err = w.post(ctx, n.EventID, body)
		if err == nil || try >= retries {
			return err
		}
		t := time.NewTimer(backoff << try)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

func (w *Webhook) post(ctx context.Context, eventID string, body []byte) error {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultWebhookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("alert: webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(w.Secret, body))
	req.Header.Set(EventIDHeader, eventID)
	client := w.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("alert: webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) // lets the connection be reused
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alert: webhook: %s answered %s", w.URL, resp.Status)
	}
	return nil
}
