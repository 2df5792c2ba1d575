package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestNotMigratedMapsOnlySheafsMissingTablesAndColumns(t *testing.T) {
	t.Parallel()
	pg := func(code, msg string) error {
		return fmt.Errorf("queue: enqueue: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{pg("42P01", `relation "sheaf_jobs" does not exist`), true},
		{pg("42P01", `relation "app.sheaf_schedules" does not exist`), true},
		{pg("42703", `column "period" does not exist`), true},
		{pg("42703", `column "period" of relation "sheaf_jobs" does not exist`), true},
		{pg("42703", `column j.period does not exist`), true},
		{pg("42P01", `relation "orders" does not exist`), false},
		{pg("42P01", `missing FROM-clause entry for table "sheaf_jobs"`), false},
		{pg("42703", `column "total" of relation "orders" does not exist`), false},
		{pg("22P05", `unsupported Unicode escape sequence`), false},
		{errors.New(`relation "sheaf_jobs" does not exist`), false}, // not the database's
	} {
		got := notMigrated(tc.err)
		require.Equal(t, tc.want, errors.Is(got, ErrNotMigrated), tc.err.Error())
		var pe *pgconn.PgError
		require.Equal(t, errors.As(tc.err, &pe), errors.As(got, &pe), "the database's error stays in the chain")
		if !tc.want {
			require.Same(t, tc.err, got)
		}
	}
	require.NoError(t, notMigrated(nil))
}

func TestTextFlaw(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]string{
		"":                    "",
		"plain":               "",
		"é \U0001F600 \ufffd": "",
		"a\x00":               "NUL byte at offset 1",
		"ok\xff":              "invalid UTF-8 at offset 2",
		"\xed\xa0\x80":        "invalid UTF-8 at offset 0", // a surrogate
		"\xc0\x80":            "invalid UTF-8 at offset 0", // NUL, overlong
		"\xf4\x90\x80\x80":    "invalid UTF-8 at offset 0", // beyond U+10FFFF
		"é\xe9":               "invalid UTF-8 at offset 2",
	} {
		require.Equal(t, want, textFlaw(s), "%q", s)
	}
}

type benchArgs struct {
	County string            `json:"county"`
	Date   string            `json:"date"`
	Format string            `json:"format"`
	Tags   map[string]string `json:"tags"`
}

func (benchArgs) Kind() string { return "bench" }

type benchNoop struct{}

func (benchNoop) Kind() string { return "bench_noop" }

// BenchmarkPrepare measures what a job costs before any statement: encoding
// and every check, for the no-op jobs of BenchmarkQueueThroughput and for a
// job with a few strings, options and claims.
func BenchmarkPrepare(b *testing.B) {
	reg := NewRegistry()
	h := func(context.Context, *Job[benchArgs]) error { return nil }
	if err := Register(reg, HandlerFunc[benchArgs](h)); err != nil {
		b.Fatal(err)
	}
	if err := Register(reg, HandlerFunc[benchNoop](func(context.Context, *Job[benchNoop]) error { return nil })); err != nil {
		b.Fatal(err)
	}
	c := &Client{ops{reg: reg}}
	report := Params{
		Args: benchArgs{County: "Travis", Date: "2025-12-08", Format: "csv", Tags: map[string]string{"team": "Ops – Austin"}},
		Options: []EnqueueOption{CorrelationID("req-4f1c2a"), IdempotencyKey("travis-2025-12-08"),
			AuthContext(Auth{"sub": "user-17", "role": "SUPERVISOR", "counties": []any{"Travis", "Hays"}})},
	}
	for name, p := range map[string]Params{"noop": {Args: benchNoop{}}, "report": report} {
		b.Run(name, func(b *testing.B) {
			jobs := make([]Params, 1000)
			for i := range jobs {
				jobs[i] = p
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.prepareAll(jobs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(jobs))/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
