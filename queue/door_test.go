package queue_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
)

// textArgs reaches every kind of value encoding/json encodes.
type textArgs struct {
	County string            `json:"county"`
	Tags   map[string]string `json:"tags,omitempty"`
	Items  []string          `json:"items,omitempty"`
	Ptr    *string           `json:"ptr,omitempty"`
	Any    any               `json:"any,omitempty"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	Own    ownJSON           `json:"own,omitempty"`
	Text   ownText           `json:"text,omitempty"`
	Num    json.Number       `json:"num,omitempty"`
	Skip   string            `json:"-"` // never stored, so never refused
	Nested
}

func (textArgs) Kind() string { return "text" }

type Nested struct {
	Inner []map[string]*string `json:"inner,omitempty"`
}

// ownJSON writes itself verbatim as JSON.
type ownJSON string

func (o ownJSON) MarshalJSON() ([]byte, error) {
	if o == "" {
		return []byte("null"), nil
	}
	return []byte(o), nil
}

// ownText writes itself verbatim as text.
type ownText string

func (o ownText) MarshalText() ([]byte, error) { return []byte(o), nil }

func ptr(s string) *string { return &s }

func textEnv(t *testing.T) *env {
	return newEnv(t, func(r *queue.Registry) {
		require.NoError(t, queue.Register(r, nopHandler[textArgs]()))
		require.NoError(t, queue.Register(r, nopHandler[noop]()))
	})
}

// Strings PostgreSQL would refuse, or that encoding/json would store
// altered, anywhere in a job are refused before any statement, with the
// error of the input's kind naming the field; nothing is created, whichever
// way in the job came.
func TestEnqueueRefusesTextPostgreSQLWouldNotStoreAsGiven(t *testing.T) {
	t.Parallel()
	e := textEnv(t)
	ctx := context.Background()
	const (
		nul       = "a\x00b"
		ff        = "ok\xff"
		surrogate = "\xed\xa0\x80" // U+D800 written as UTF-8
		overlong  = "\xc0\x80"     // NUL in two bytes
	)
	type tc struct {
		args queue.Args
		opts []queue.EnqueueOption
		want error
		msg  string
	}
	cases := map[string]tc{
		"NUL in a field":            {args: textArgs{County: nul}, want: queue.ErrInvalidPayload, msg: "args.County: NUL byte at offset 1"},
		"0xFF in a field":           {args: textArgs{County: ff}, want: queue.ErrInvalidPayload, msg: "args.County: invalid UTF-8 at offset 2"},
		"surrogate in a field":      {args: textArgs{County: surrogate}, want: queue.ErrInvalidPayload, msg: "args.County: invalid UTF-8 at offset 0"},
		"overlong in a field":       {args: textArgs{County: overlong}, want: queue.ErrInvalidPayload, msg: "args.County: invalid UTF-8 at offset 0"},
		"map key":                   {args: textArgs{Tags: map[string]string{"fine": "x", nul: "x"}}, want: queue.ErrInvalidPayload, msg: `args.Tags: key "a\x00b": NUL byte at offset 1`},
		"map value":                 {args: textArgs{Tags: map[string]string{"k": ff}}, want: queue.ErrInvalidPayload, msg: `args.Tags["k"]: invalid UTF-8`},
		"slice element":             {args: textArgs{Items: []string{"x", nul}}, want: queue.ErrInvalidPayload, msg: "args.Items[1]: NUL byte"},
		"pointer":                   {args: textArgs{Ptr: ptr(ff)}, want: queue.ErrInvalidPayload, msg: "args.Ptr: invalid UTF-8"},
		"interface":                 {args: textArgs{Any: map[string]any{"x": []any{1, ff}}}, want: queue.ErrInvalidPayload, msg: `args.Any["x"][1]: invalid UTF-8`},
		"embedded":                  {args: textArgs{Nested: Nested{Inner: []map[string]*string{{"k": ptr(nul)}}}}, want: queue.ErrInvalidPayload, msg: `args.Nested.Inner[0]["k"]: NUL byte`},
		"raw NUL escape":            {args: textArgs{Raw: json.RawMessage(`{"a":"\u0000"}`)}, want: queue.ErrInvalidPayload, msg: `args.Raw: escape \u0000 (NUL) at offset 6 of what its MarshalJSON writes`},
		"raw invalid UTF-8":         {args: textArgs{Raw: json.RawMessage("\"\xff\"")}, want: queue.ErrInvalidPayload, msg: "args.Raw: invalid UTF-8"},
		"raw lone surrogate":        {args: textArgs{Raw: json.RawMessage(`"\udc00"`)}, want: queue.ErrInvalidPayload, msg: `args.Raw: unpaired surrogate escape \udc00`},
		"raw high surrogate alone":  {args: textArgs{Raw: json.RawMessage(`"\ud800x"`)}, want: queue.ErrInvalidPayload, msg: `args.Raw: unpaired surrogate escape \ud800`},
		"raw huge number":           {args: textArgs{Raw: json.RawMessage(`[1e999999]`)}, want: queue.ErrInvalidPayload, msg: "args.Raw: number 1e999999 outside PostgreSQL's numeric range"},
		"MarshalJSON NUL":           {args: textArgs{Own: `"x\u0000"`}, want: queue.ErrInvalidPayload, msg: `args.Own: escape \u0000 (NUL)`},
		"MarshalText 0xFF":          {args: textArgs{Text: ff}, want: queue.ErrInvalidPayload, msg: "args.Text: invalid UTF-8 at offset 2 in what its MarshalText writes"},
		"json.Number out of range":  {args: textArgs{Num: "1e-20000"}, want: queue.ErrInvalidPayload, msg: "args.Num: number 1e-20000 outside"},
		"auth value":                {args: noop{}, opts: []queue.EnqueueOption{queue.AuthContext(queue.Auth{"role": nul})}, want: queue.ErrInvalidPayload, msg: `auth["role"]: NUL byte`},
		"auth key":                  {args: noop{}, opts: []queue.EnqueueOption{queue.AuthContext(queue.Auth{ff: "x"})}, want: queue.ErrInvalidPayload, msg: `auth: key "ok\xff": invalid UTF-8`},
		"auth nested":               {args: noop{}, opts: []queue.EnqueueOption{queue.AuthContext(queue.Auth{"scope": map[string]any{"counties": []any{"Travis", ff}}})}, want: queue.ErrInvalidPayload, msg: `auth["scope"]["counties"][1]: invalid UTF-8`},
		"idempotency key NUL":       {args: noop{}, opts: []queue.EnqueueOption{queue.IdempotencyKey(nul)}, want: queue.ErrInvalidOption, msg: "IdempotencyKey: NUL byte at offset 1"},
		"idempotency key 0xFF":      {args: noop{}, opts: []queue.EnqueueOption{queue.IdempotencyKey(ff)}, want: queue.ErrInvalidOption, msg: "IdempotencyKey: invalid UTF-8"},
		"correlation ID NUL":        {args: noop{}, opts: []queue.EnqueueOption{queue.CorrelationID(nul)}, want: queue.ErrInvalidOption, msg: "CorrelationID: NUL byte"},
		"correlation ID 0xFF":       {args: noop{}, opts: []queue.EnqueueOption{queue.CorrelationID(ff)}, want: queue.ErrInvalidOption, msg: "CorrelationID: invalid UTF-8"},
		"queue NUL":                 {args: noop{}, opts: []queue.EnqueueOption{queue.OnQueue(nul)}, want: queue.ErrInvalidOption, msg: "OnQueue: NUL byte"},
		"queue 0xFF":                {args: noop{}, opts: []queue.EnqueueOption{queue.OnQueue(ff)}, want: queue.ErrInvalidOption, msg: "OnQueue: invalid UTF-8"},
		"run":                       {args: noop{}, opts: []queue.EnqueueOption{queue.InRun(surrogate)}, want: queue.ErrInvalidOption, msg: "InRun: invalid UTF-8"},
		"period":                    {args: noop{}, opts: []queue.EnqueueOption{queue.InPeriod(nul)}, want: queue.ErrInvalidOption, msg: "InPeriod: NUL byte"},
		"unencodable auth, as ever": {args: noop{}, opts: []queue.EnqueueOption{queue.AuthContext(queue.Auth{"f": func() {}})}, want: queue.ErrInvalidOption, msg: "auth context does not encode"},
	}
	for name, c := range cases {
		_, err := e.client.Enqueue(ctx, c.args, c.opts...)
		require.ErrorIs(t, err, c.want, name)
		require.ErrorContains(t, err, c.msg, name)
		require.NotContains(t, err.Error(), "SQLSTATE", name)

		// The same job second of two, in one statement, in a COPY, and in
		// keyed slices: the job's index is named.
		jobs := []queue.Params{{Args: noop{}}, {Args: c.args, Options: c.opts}}
		_, err = e.client.EnqueueMany(ctx, jobs)
		require.ErrorIs(t, err, c.want, name)
		require.ErrorContains(t, err, "job 1: ", name)
		require.ErrorContains(t, err, c.msg, name)
		_, err = e.client.EnqueueBulk(ctx, jobs)
		require.ErrorIs(t, err, c.want, name)
		require.ErrorContains(t, err, "job 1: ", name)
		jobs[0].Options = []queue.EnqueueOption{queue.IdempotencyKey("first")}
		_, err = e.client.EnqueueBulk(ctx, jobs)
		require.ErrorIs(t, err, c.want, name)
	}
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))
}

// EnqueueRaw's payload is checked as it will be stored, not as it decodes.
func TestEnqueueRawRefusesWhatJSONBWouldNot(t *testing.T) {
	t.Parallel()
	e := textEnv(t)
	ctx := context.Background()
	for payload, msg := range map[string]string{
		`{"county":"a\u0000"}`:                 "payload: escape \\u0000 (NUL) at offset 12",
		"{\"county\":\"ok\xff\"}":              "payload: invalid UTF-8 at offset 13",
		`{"county":"\ud800"}`:                  `payload: unpaired surrogate escape \ud800 at offset 11`,
		`{"county":"x","extra":1e999999}`:      "payload: number 1e999999 outside PostgreSQL's numeric range at offset 22",
		`{"county":"x","extra":0.0001e-16380}`: "payload: number 0.0001e-16380 outside",
		`{"county":"x","k\u0000":1}`:           "payload: escape \\u0000 (NUL) at offset 16",
	} {
		_, err := e.client.EnqueueRaw(ctx, "text", json.RawMessage(payload))
		require.ErrorIs(t, err, queue.ErrInvalidPayload, payload)
		require.ErrorContains(t, err, msg, payload)
	}
	_, err := e.client.EnqueueRaw(ctx, "text", json.RawMessage(`{}`), queue.CorrelationID("\xff"))
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.Zero(t, e.db.Count(t, "SELECT count(*) FROM sheaf_jobs"))

	// What jsonb does store is taken: escapes of U+FFFD and of a whole
	// surrogate pair, numbers at the ends of numeric's range.
	for _, payload := range []string{`{"county":"\ufffd \ud83d\ude00"}`, `{"county":"x","extra":[1e131071,1e-16383,0e999999]}`} {
		_, err := e.client.EnqueueRaw(ctx, "text", json.RawMessage(payload))
		require.NoError(t, err, payload)
	}
}

// Text that PostgreSQL stores as given is stored, and read back the same.
func TestEnqueueStoresUnusualButValidTextIntact(t *testing.T) {
	t.Parallel()
	e := textEnv(t)
	ctx := context.Background()
	// 26 bytes, then two-byte runes: odd[:50], odd[:100] and odd[:200] are
	// whole runes.
	odd := "\ufffd \U0001F600 \u2028 <&> \"\\ \x7f \uffff " + strings.Repeat("é", 1000)
	args := textArgs{
		County: odd, Tags: map[string]string{odd: odd}, Items: []string{odd}, Ptr: ptr(odd), Any: []any{odd},
		Raw: json.RawMessage(`"\ufffd"`), Own: `"\ud83d\ude00"`, Text: ownText(odd), Num: "12.50",
		Skip: "a\x00b",
	}
	res, err := e.client.Enqueue(ctx, args, queue.IdempotencyKey(odd[:100]), queue.CorrelationID(odd[:200]),
		queue.OnQueue(odd[:50]), queue.AuthContext(queue.Auth{odd: []any{odd}}))
	require.NoError(t, err)
	rec, err := e.client.Get(ctx, res.Job.ID)
	require.NoError(t, err)
	var back textArgs
	require.NoError(t, json.Unmarshal(rec.Payload, &back))
	require.Equal(t, ownJSON("😀"), back.Own) // decoded, as jsonb decodes escapes
	require.JSONEq(t, `"\ufffd"`, string(back.Raw))
	args.Skip, args.Own, back.Own, args.Raw, back.Raw = "", "", "", nil, nil
	require.True(t, args.County == back.County, "the string comes back byte for byte")
	require.Equal(t, args, back)
	require.Equal(t, odd[:100], *rec.IdempotencyKey)
	require.Equal(t, odd[:200], *rec.CorrelationID)
	require.Equal(t, odd[:50], rec.Queue)
	require.Equal(t, queue.Auth{odd: []any{odd}}, rec.Auth)
}

type nulKind struct{}

func (nulKind) Kind() string { return "bad\x00kind" }

type ffKind struct{}

func (ffKind) Kind() string { return "bad\xffkind" }

// Every other name that reaches the database is checked where it is given.
func TestNamesAreCheckedWhereTheyAreGiven(t *testing.T) {
	t.Parallel()
	e := textEnv(t)
	ctx := context.Background()
	r := queue.NewRegistry()
	require.ErrorContains(t, queue.Register(r, nopHandler[nulKind]()), `Kind() returns "bad\x00kind": NUL byte at offset 3`)
	require.ErrorIs(t, queue.Register(r, nopHandler[ffKind]()), queue.ErrInvalidOption)
	require.ErrorIs(t, queue.Register(r, nopHandler[noop](), queue.OnQueue("q\x00")), queue.ErrInvalidOption)
	require.ErrorIs(t, r.Schedule(queue.Periodic{Name: "s\xff", Spec: queue.Daily(1, 0), Jobs: func(queue.Tick) []queue.Params { return nil }}), queue.ErrInvalidOption)
	require.ErrorIs(t, queue.Depend(e.reg, queue.Rule{Name: "r\x00", Parents: []string{"noop"}, Each: true},
		func([]queue.JobRecord) (textArgs, []queue.EnqueueOption) { return textArgs{}, nil }), queue.ErrInvalidOption)
	for name, opt := range map[string]queue.RunnerOption{
		"WithQueues: NUL byte": queue.WithQueues("default", "q\x00"),
		"WithQueues: invalid":  queue.WithQueues("\xff"),
		"WithQueues: queue":    queue.WithQueues(strings.Repeat("q", 129)),
		"WithRunnerID: NUL":    queue.WithRunnerID("r\x00"),
		"WithRunnerID: inval":  queue.WithRunnerID("r\xc0\x80"),
	} {
		_, err := queue.NewRunner(e.client, opt)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
		require.ErrorContains(t, err, name[:strings.Index(name, ":")], name)
	}
	for name, f := range map[string]queue.Filter{
		"Filter.Kinds[1]":      {Kinds: []string{"text", "\x00"}},
		"Filter.Statuses[0]":   {Statuses: []queue.Status{"\xff"}},
		"Filter.Queue":         {Queue: "\x00"},
		"Filter.CorrelationID": {CorrelationID: "\xff"},
		"Filter.RunID":         {RunID: "\x00"},
		"Filter.Period":        {Period: "\xff"},
	} {
		_, err := e.client.List(ctx, f)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
		require.ErrorContains(t, err, name, name)
		_, err = e.client.RetryFailed(ctx, f)
		if name != "Filter.Statuses[0]" { // RetryFailed ignores statuses
			require.ErrorIs(t, err, queue.ErrInvalidOption, name)
		}
	}
	for name, q := range map[string]queue.ReviewQuery{
		"ReviewQuery.RunID":  {RunID: "n@\x00"},
		"ReviewQuery.Period": {Period: "2025-12-0\xff"},
	} {
		_, err := e.client.Review(ctx, q)
		require.ErrorIs(t, err, queue.ErrInvalidOption, name)
		require.ErrorContains(t, err, name, name)
	}
}
