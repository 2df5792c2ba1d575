package email_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
	"github.com/sheaf-dev/sheaf/queue/alert/email"
)

// Mail the on-call when a run fails badly, and everyone the night's
// digest at 07:00 in Kolkata; the alerter runs on the runners' maintenance
// leader.
func ExampleSink() {
	var client *queue.Client // from queue.NewClient, migrated
	loc, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		log.Fatal(err)
	}
	mail := &email.Sink{Host: "smtp.example.com", Username: "sheaf", Password: os.Getenv("SMTP_PASSWORD"),
		From: "sheaf@example.com", To: []string{"oncall@example.com"}}
	alerter, err := alert.New(client,
		alert.WithRules(alert.RunFailures(10), alert.RunDeadline("05:00", loc)),
		alert.WithDigest("07:00", loc),
		alert.WithSink("mail", mail))
	if err != nil {
		log.Fatal(err)
	}
	runner, err := queue.NewRunner(client, queue.WithMaintenance(alerter))
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
