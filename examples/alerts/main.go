// Command alerts shows the queue telling a person that a night went wrong:
// an alert.Alerter, run by the runners' maintenance leader, posts a signed
// webhook when a job fails for good, and another when it is retried and
// completes.
//
// The receiver is a small HTTP server in the program, as an on-call tool
// would be: it checks each request's signature against the shared secret,
// and drops requests whose event ID it has seen.
//
//	go run ./examples/alerts [-dsn URL]
//
// Without -dsn or DATABASE_URL, it works in a new SQLite file in a
// temporary folder, which it removes at the end. With a postgres:// URL, it
// works in a schema of its own, sheaf_example_alerts, which it drops and
// recreates at start.
package main

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
)

// Report is the example's job: a county report whose feed is down until
// it is brought back.
type Report struct {
	County string `json:"county"`
}

func (Report) Kind() string { return "report" }

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a new temporary folder)")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn); err != nil {
		log.Fatal("alerts: ", err)
	}
}

// receiver is the on-call side: it verifies signatures, drops duplicates
// by event ID, and hands each new notice on.
type receiver struct {
	secret []byte
	seen   map[string]bool
	got    chan alert.Notice
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !hmac.Equal([]byte(r.Header.Get(alert.SignatureHeader)), []byte(alert.Sign(rc.secret, body))) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	id := r.Header.Get(alert.EventIDHeader)
	if rc.seen[id] { // the server handles one request at a time here
		return
	}
	var n alert.Notice
	if err := json.Unmarshal(body, &n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.seen[id] = true
	select {
	case rc.got <- n:
	case <-r.Context().Done():
	}
}

func run(ctx context.Context, dsn string) (err error) {
	edb, err := exampledb.Open(ctx, "sheaf_example_alerts", dsn, 10)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, edb.Close()) }()

	var feedUp atomic.Bool
	reg := queue.NewRegistry()
	err = queue.Register(reg, queue.HandlerFunc[Report](func(_ context.Context, j *queue.Job[Report]) error {
		if !feedUp.Load() {
			return queue.Permanent(fmt.Errorf("county %s: timesheet feed offline", j.Args.County))
		}
		return nil
	}))
	if err != nil {
		return err
	}
	quiet := slog.New(slog.DiscardHandler)
	client, err := queue.NewClient(edb.DB, reg, queue.WithLogger(quiet))
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}

	rc := &receiver{secret: []byte("a secret shared with the receiver"), seen: map[string]bool{}, got: make(chan alert.Notice)}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	alerter, err := alert.New(client,
		alert.WithRules(alert.Dead(), alert.RunFailures(1)),
		alert.WithSink("on-call", &alert.Webhook{URL: srv.URL, Secret: rc.secret}),
		alert.WithInterval(100*time.Millisecond), // a minute by default
		alert.WithLogger(quiet))
	if err != nil {
		return err
	}
	runner, err := queue.NewRunner(client, queue.WithMaintenance(alerter), queue.WithPollInterval(50*time.Millisecond))
	if err != nil {
		return err
	}
	if err := runner.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, runner.Stop(context.WithoutCancel(ctx))) }()
	fmt.Printf("%s; webhook receiver at %s\n\n", edb.Where, srv.URL)

	job, err := client.Enqueue(ctx, Report{County: "Travis"}, queue.InRun("nightly@2025-12-01"))
	if err != nil {
		return err
	}
	if err := expect(ctx, rc, 2); err != nil {
		return err
	}
	fmt.Println("\nthe feed is back; retrying the job")
	feedUp.Store(true)
	if _, err := client.Retry(ctx, job.Job.ID); err != nil {
		return err
	}
	return expect(ctx, rc, 2)
}

// expect prints the next n notices the receiver gets, in the order they
// come, or fails after a minute.
func expect(ctx context.Context, rc *receiver, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for range n {
		select {
		case got := <-rc.got:
			fmt.Printf("%-8s %-12s %s\n", got.Type, got.Rule, got.Summary)
		case <-ctx.Done():
			return fmt.Errorf("waiting for a notice: %w", ctx.Err())
		}
	}
	return nil
}
