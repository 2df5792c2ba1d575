package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
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

// scanJSON agrees with PostgreSQL on what jsonb refuses, among JSON that
// encoding/json accepts.
func TestScanJSONAgreesWithPostgreSQL(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	for _, in := range []string{
		`{}`, `"plain"`, `"\u0000"`, `{"\u0000":1}`, `"\\u0000"`, `"\\\u0000"`, `"\\\\u0000"`,
		`"\ufffd"`, `"\uFFFD"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`,
		`"\ude00"`, `"\ude00\ud83d"`, `"\\ud800"`, `["\"", "\ud800"]`, `"a\"\\\"\u0000"`,
		"\"\xff\"", "\"\xed\xa0\x80\"", "\"\xc0\x80\"", `"é"`,
		`1e131071`, `1e131072`, `9.99e131071`, `10e131071`, `-1e131072`, `0.1e131072`, `0.01e131073`,
		`1e-16383`, `1e-16384`, `1.5e-16383`, `0.0001e-16379`, `0.0001e-16380`, `0e999999`, `0e-16383`, `0e-16384`,
		`0e1073741822`, `0e1073741823`, `1e-1073741823`, `1e99999999999999999999`, `0.` + strings.Repeat("0", 16383),
		`0.` + strings.Repeat("0", 16384), strings.Repeat("9", 131072), strings.Repeat("9", 131073),
		`[1, 2.5, -3e4, {"a": [1e999999]}]`, `{"1e999999": 1}`, `"1e999999"`, `[true, false, null, 0]`,
	} {
		if !json.Valid([]byte(in)) {
			_, _, _ = scanJSON([]byte(in)) // must not panic, whatever it says
			continue
		}
		_, found, _ := scanJSON([]byte(in))
		err := db.SQL.QueryRow("SELECT $1::text::jsonb IS NOT NULL", in).Scan(new(bool))
		require.Equal(t, err != nil, found, "%.60s: PostgreSQL says %v", in, err)
	}
}

// FuzzScanJSON holds scanJSON to PostgreSQL's word: of JSON that
// encoding/json accepts, it finds something exactly when jsonb refuses it.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `"\u0000"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `1e131071`,
		`0.0001e-16380`, `[1.5e-16382, -0, 0e99]`, `{"k\u00e9":[true,null]}`} {
		f.Add([]byte(s))
	}
	db := pgtest.New(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, found, _ := scanJSON(b)
		if !json.Valid(b) {
			return // only that it returns
		}
		err := db.SQL.QueryRow("SELECT $1::text::jsonb IS NOT NULL", string(b)).Scan(new(bool))
		require.Equal(t, err != nil, found, "%q: PostgreSQL says %v", b, err)
	})
}

func TestScanJSONReportsWhereAndReplacements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		at       int
		replaced bool
	}{
		{`{"a":"x\u0000"}`, 7, false},
		{`{"a":"\ufffd","b":"\u0000"}`, 19, true},
		{`{"a":"\ufffd"}`, -1, true},
		{`"\\ufffd"`, -1, false},
		{"[\"x\",\"\xff\"]", 6, false},
		{`{"n":[1, 2, 3e999999]}`, 12, false},
	} {
		f, found, replaced := scanJSON([]byte(tc.in))
		require.Equal(t, tc.at >= 0, found, tc.in)
		if found {
			require.Equal(t, tc.at, f.at, tc.in)
		}
		require.Equal(t, tc.replaced, replaced, tc.in)
	}
	// Many escapes in one long string take linear time: each backslash is
	// looked for once, and the closing quote again only past an escaped
	// one. Looking for the quote from every escape would take minutes here.
	long := `"` + strings.Repeat(`\n\"x`, 1<<18) + `"`
	_, found, _ := scanJSON([]byte(long))
	require.False(t, found)
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

type recursive struct {
	Name string
	Kids []recursive
}

type withRaw struct{ R json.RawMessage }

type withText struct{ T ownText }

type ownText string

func (o ownText) MarshalText() ([]byte, error) { return []byte(o), nil }

type withPtrMarshaler struct{ P ptrMarshaler }

type ptrMarshaler struct{}

func (*ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte("1"), nil }

// hidden holds non-plain types only where encoding/json does not look.
type hidden struct {
	A   any `json:"-"`
	raw json.RawMessage
}

func TestPlainJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{benchArgs{}, true}, {benchNoop{}, true}, {recursive{}, true}, {hidden{raw: json.RawMessage(`1`)}, true}, {&recursive{}, true},
		{map[string][]int{}, true}, {[2]float64{}, true},
		{withRaw{}, false}, {withText{}, false}, {withPtrMarshaler{}, false}, {map[string]any{}, false},
		{json.Number(""), false}, {[]ownText{}, false}, {map[ownText]int{}, false},
	} {
		v, want := tc.v, tc.want
		require.Equal(t, want, plainJSON(reflect.TypeOf(v)), "%T", v)
	}
}
