package nats_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue/bridge"
	"github.com/sheaf-dev/sheaf/queue/bridge/internal/bridgetest"
	"github.com/sheaf-dev/sheaf/queue/bridge/nats"
)

// BenchmarkConsumer publishes SHEAF_BENCH_JOBS requests (default 20000)
// per iteration to a stream, then times a consumer from its start until
// they are all jobs, and reports jobs/s, and the CPU time per job of this
// process (the consumer) and of the database's server; the NATS server's
// is not counted. No runner works the jobs, so the limit on queued jobs is
// lifted. SHEAF_BENCH_BATCH sets the consumer's MaxBatch.
func BenchmarkConsumer(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("SHEAF_BENCH_JOBS")); err == nil {
		n = v
	}
	batch, _ := strconv.Atoi(os.Getenv("SHEAF_BENCH_BATCH"))
	_, js := connect(b, serverURL())
	ctx := context.Background()
	name := fmt.Sprintf("sheaf_bench_req_%d", streams.Add(1))
	for _, s := range []string{name, name + "_dead"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s, Subjects: []string{s + ".>"}}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = js.DeleteStream(context.Background(), s) })
	}
	total := n * b.N
	for i := range total {
		if _, err := js.PublishAsync(name+".in", []byte(`{"kind": "report", "payload": {}}`)); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	c, db := bridgetest.NewQueueDB(b)
	if err := bridge.Disable(ctx, c); err != nil { // the consumer alone
		b.Fatal(err)
	}
	sub, err := bridge.NewSubmitter(c, int64(total+1), 0)
	if err != nil {
		b.Fatal(err)
	}
	k, err := nats.NewConsumer(nats.ConsumerConfig{JetStream: js, Stream: name, Durable: "bench", DeadLetterSubject: name + "_dead.x",
		Submitter: sub, MaxBatch: batch, Log: bridgetest.Quiet()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := pgtest.StartCPU(db)
	if err := k.Start(ctx); err != nil {
		b.Fatal(err)
	}
	bridgetest.AwaitJobs(b, c, total)
	b.StopTimer()
	cpu.Stop().PerJob(b, total)
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
	if err := k.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
