// Command jobweaver is the job lifecycle of three services around Kafka,
// built on one sheaf queue: an API publishes job requests to a topic; the
// queue's consumer enqueues them (a malformed one goes to a dead-letter
// topic with its reason); runners work them; the bridge's relay
// publishes job-created, job-completed, job-failed (an attempt failed and
// the job will retry) and job-dead-letter (failed for good); and a
// downstream service prints each event with its trace ID, dropping
// duplicates by event ID.
//
// Kafka is franz-go's kfake, a cluster in the process that speaks the
// Kafka protocol: point -brokers at a real cluster to use one instead.
// Without -dsn or DATABASE_URL, the queue works in a new SQLite file in a
// temporary folder.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/kafka"
)

// Report is the example's job. Flaky fails its first attempt; Broken
// fails for good.
type Report struct {
	County string `json:"county"`
	Flaky  bool   `json:"flaky,omitempty"`
	Broken bool   `json:"broken,omitempty"`
}

func (Report) Kind() string { return "report" }

// The topics, as the three services name them.
const (
	requestsTopic = "job-requests"
	rejectedTopic = "job-requests-dead"
)

var eventTopics = map[bridge.Event]string{
	bridge.Created: "job-created", bridge.Completed: "job-completed", bridge.Retrying: "job-failed",
	bridge.Failed: "job-dead-letter", bridge.Cancelled: "job-cancelled",
}

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a new temporary folder)")
	brokers := flag.String("brokers", "", "Kafka brokers, comma-separated (default: a kfake cluster in the process)")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, *brokers, os.Stdout); err != nil {
		log.Fatal("jobweaver: ", err)
	}
}

// requests are what the API publishes: four good reports, one of them
// flaky, one broken, and one request that is not JSON.
var requests = []string{
	`{"kind": "report", "payload": {"county": "Kent"}}`,
	`{"kind": "report", "payload": {"county": "Bexar"}, "priority": 8}`,
	`{"kind": "report", "payload": {"county": "Travis", "flaky": true}}`,
	`{"kind": "report", "payload": {"county": "Harris", "broken": true}}`,
	`{"kind": "report", "payload": {"county": `,
	`{"kind": "report", "payload": {"county": "Dallas"}}`,
}

func run(ctx context.Context, dsn, brokers string, out *os.File) (err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	addrs := strings.Split(brokers, ",")
	if brokers == "" {
		topics := []string{requestsTopic, rejectedTopic}
		for _, t := range eventTopics {
			topics = append(topics, t)
		}
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
		if err != nil {
			return err
		}
		defer cluster.Close()
		addrs = cluster.ListenAddrs()
	}
	edb, err := exampledb.Open(ctx, "sheaf_example_jobweaver", dsn, 10)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, edb.Close()) }()

	// The queue, with its outbox on before any job is enqueued.
	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[Report](work), queue.MaxAttempts(2), queue.RetryBackoff(queue.Delays{})); err != nil {
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
	if err := bridge.Enable(ctx, client); err != nil {
		return err
	}

	// One Kafka client produces for the API and for the relay.
	producer, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer producer.Close()
	pub, err := kafka.NewPublisher(producer, 0)
	if err != nil {
		return err
	}
	opts := []bridge.Option{bridge.WithSource("jobweaver"), bridge.WithLogger(quiet)}
	for e, t := range eventTopics {
		opts = append(opts, bridge.WithTopic(e, t))
	}
	relay, err := bridge.NewRelay(client, pub, opts...)
	if err != nil {
		return err
	}
	runner, err := queue.NewRunner(client, queue.WithMaintenance(relay), queue.WithLogger(quiet), queue.WithPollInterval(50*time.Millisecond))
	if err != nil {
		return err
	}
	if err := runner.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, runner.Stop(context.Background())) }()

	sub, err := bridge.NewSubmitter(client, 0, 0)
	if err != nil {
		return err
	}
	consumer, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: addrs, Group: "jobweaver", Topics: []string{requestsTopic},
		DeadLetterTopic: rejectedTopic, Submitter: sub, Log: quiet,
		Options: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}})
	if err != nil {
		return err
	}
	if err := consumer.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, consumer.Stop(context.Background())) }()

	// The API: each request with a trace of its own.
	var recs []*kgo.Record
	for i, r := range requests {
		tp := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		recs = append(recs, &kgo.Record{Topic: requestsTopic, Value: []byte(r), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(tp)}}})
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	fmt.Fprintf(out, "api: published %d requests to %s\n", len(recs), requestsTopic)
	return downstream(ctx, addrs, out)
}

func work(_ context.Context, j *queue.Job[Report]) error {
	switch {
	case j.Args.Broken:
		return queue.Permanent(fmt.Errorf("county %s: no such feed", j.Args.County))
	case j.Args.Flaky && j.Attempt == 1:
		return fmt.Errorf("county %s: feed timed out", j.Args.County)
	}
	return nil
}

// downstream prints the events and the rejected requests until every job
// has finished: four completed, one dead letter, one request rejected.
func downstream(ctx context.Context, addrs []string, out *os.File) error {
	topics := []string{rejectedTopic}
	for _, t := range eventTopics {
		topics = append(topics, t)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := map[string]bool{}
	completed, dead, rejected := 0, 0, 0
	for completed < 4 || dead < 1 || rejected < 1 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waited for the events: %w", err)
		}
		for _, r := range fetches.Records() {
			if r.Topic == rejectedTopic {
				rejected++
				fmt.Fprintf(out, "%-17s %s: %s\n", r.Topic, traceID(kafka.Header(r, "traceparent")), kafka.Header(r, kafka.ReasonHeader))
				continue
			}
			id := kafka.Header(r, kafka.IDHeader)
			if seen[id] {
				continue // a copy the relay sent again
			}
			seen[id] = true
			var e bridge.CloudEvent
			if err := json.Unmarshal(r.Value, &e); err != nil {
				return err
			}
			switch r.Topic {
			case "job-completed":
				completed++
			case "job-dead-letter":
				dead++
			}
			fmt.Fprintf(out, "%-17s %s: job %s attempt %d %s\n", r.Topic, traceID(e.TraceParent), e.Subject, e.Data.Attempt, e.Data.Error)
		}
	}
	return nil
}

// traceID is the trace ID of a W3C traceparent.
func traceID(tp string) string {
	if len(tp) < 35 {
		return "-"
	}
	return tp[3:35]
}
