package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// The smoke run works its jobs on an SQLite file, scrapes its own /metrics
// over HTTP and finds every expected metric; its spans, printed by the
// stdout exporter, include the attempts' CONSUMER spans with their links.
func TestSmokeScrapesMetrics(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), options{addr: "127.0.0.1:0", smoke: true, traces: true}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"every expected metric is there",
		`sheaf_queue_dead_letters_total{`,
		`"Name": "process default"`,
		`"SpanKind": 5`, // CONSUMER
		`"Name": "enqueue_many default"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}
