package kafka_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/bridge/kafka"
)

// BenchmarkConsumer publishes SHEAF_BENCH_JOBS requests (default 20000)
// per iteration to a kfake topic, then times a consumer from its start
// until they are all jobs, and reports jobs/s, and steady_jobs/s from the
// first job's enqueue to the last's (the group's join left out), and the
// CPU time per job of this process (the consumer and the in-process
// broker) and of the database's server. No runner works them, so the limit
// on queued jobs is lifted.
func BenchmarkConsumer(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("SHEAF_BENCH_JOBS")); err == nil {
		n = v
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, requests, dlq))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	c, db := bridgetest.NewQueueDB(b)
	if err := bridge.Disable(context.Background(), c); err != nil { // the consumer alone
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n*b.N)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: requests, Key: []byte(strconv.Itoa(i)), Value: []byte(`{"kind": "report", "payload": {}}`)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	sub, err := bridge.NewSubmitter(c, int64(n*b.N+1), 0)
	if err != nil {
		b.Fatal(err)
	}
	k, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: kc.ListenAddrs(), Group: "bench", Topics: []string{requests},
		DeadLetterTopic: dlq, Submitter: sub, Log: bridgetest.Quiet(), Options: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := pgtest.StartCPU(db)
	if err := k.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	bridgetest.AwaitJobs(b, c, len(recs))
	b.StopTimer()
	cpu.Stop().PerJob(b, len(recs))
	b.ReportMetric(float64(len(recs))/b.Elapsed().Seconds(), "jobs/s")
	// From the first job's enqueue to the last's: without the group's
	// join, and without the poll's lag.
	first, err := c.List(context.Background(), queue.Filter{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	last, err := c.List(context.Background(), queue.Filter{Newest: true, Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(recs))/last[0].CreatedAt.Sub(first[0].CreatedAt).Seconds(), "steady_jobs/s")
	if err := k.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
}
