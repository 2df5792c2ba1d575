package alert_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// Send a signed webhook when a job fails for good. The receiver checks
// the signature and drops notices it has seen, by event ID.
func Example() {
	dir, err := os.MkdirTemp("", "alert-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(filepath.Join(dir, "jobs.db")) // or a PostgreSQL *gorm.DB
	if err != nil {
		log.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	reg := queue.NewRegistry()
	err = queue.Register(reg, queue.HandlerFunc[report](func(_ context.Context, j *queue.Job[report]) error {
		return queue.Permanent(errors.New("county " + j.Args.County + ": no data"))
	}))
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	client, err := queue.NewClient(db, reg, queue.WithLogger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	secret := []byte("shared secret")
	seen := map[string]bool{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !hmac.Equal([]byte(r.Header.Get(alert.SignatureHeader)), []byte(alert.Sign(secret, body))) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if id := r.Header.Get(alert.EventIDHeader); !seen[id] {
			seen[id] = true
			var n alert.Notice
			_ = json.Unmarshal(body, &n)
			fmt.Println(n.Type, n.Rule+":", n.Summary)
		}
	}))
	defer receiver.Close()

	alerter, err := alert.New(client, alert.WithRules(alert.Dead()),
		alert.WithSink("ops", &alert.Webhook{URL: receiver.URL, Secret: secret}), alert.WithLogger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	// In production: queue.NewRunner(client, queue.WithMaintenance(alerter)),
	// and the runners' leader runs it. Here, one runner runs the job, and
	// the example runs a round by hand.
	runner, err := queue.NewRunner(client, queue.WithLogger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		log.Fatal(err)
	}
	job, err := client.Enqueue(ctx, report{County: "Kent"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Wait(ctx, job.Job.ID); err != nil {
		log.Fatal(err)
	}
	if err := runner.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := alerter.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// firing dead: job 1 (report) failed for good after 1 attempts: permanent: county Kent: no data
}
