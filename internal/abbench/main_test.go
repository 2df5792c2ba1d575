package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func TestParse(t *testing.T) {
	out := `goos: linux
pkg: github.com/sheaf-dev/sheaf/queue
BenchmarkQueueRawClaimComplete-2   	   50000	    107124 ns/op	         8.764 cpu-us/job	      9335 jobs/s
BenchmarkQueueThroughput-2         	   50000	    140891 ns/op	     0.7603 x_raw
BenchmarkQueueDBHandler/raw-16   	   200	  10308910 ns/op
BenchmarkQueueThroughput-2 logs a line 1 2
PASS
`
	res, err := parse(strings.NewReader(out))
	require.NoError(t, err)
	require.Equal(t, results{
		"QueueRawClaimComplete": {"ns/op": 107124, "cpu-us/job": 8.764, "jobs/s": 9335},
		"QueueThroughput":       {"ns/op": 140891, "x_raw": 0.7603},
		"QueueDBHandler/raw":    {"ns/op": 10308910},
	}, res)

	_, err = parse(strings.NewReader("BenchmarkX-2 10 fast ns/op\n"))
	require.ErrorContains(t, err, `"fast" is not a number`)
}

func TestSummary(t *testing.T) {
	rounds := [][2]results{
		{{"T": {"jobs/s": 100}}, {"T": {"jobs/s": 110}}},
		{{"T": {"jobs/s": 200}}, {"T": {"jobs/s": 180}}},
		{{"T": {"jobs/s": 100}}, {"T": {"jobs/s": 120, "only-b": 1}}},
	}
	var b strings.Builder
	printSummary(&b, rounds)
	require.Regexp(t, `T +jobs/s +100 +120 +1.10 +0.90 to 1.20`, b.String())
	require.NotContains(t, b.String(), "only-b")
}

func TestRunRefusesMissingRefs(t *testing.T) {
	err := options{b: ".", rounds: 1}.run(context.Background(), &strings.Builder{})
	require.ErrorContains(t, err, "-a and -b")
	err = options{a: "HEAD", b: ".", rounds: 0}.run(context.Background(), &strings.Builder{})
	require.ErrorContains(t, err, "-rounds")
}

func TestBuildRefusesUnknownRef(t *testing.T) {
	root, err := output(context.Background(), "", "git", "rev-parse", "--show-toplevel")
	require.NoError(t, err)
	_, err = build(context.Background(), root, "no-such-ref-at-all", t.TempDir()+"/a", "./queue")
	require.ErrorContains(t, err, "git archive")
}
