package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
)

type fuzzArgs struct {
	S   string            `json:"s"`
	M   map[string]string `json:"m"`
	Raw json.RawMessage   `json:"raw,omitempty"`
}

func (fuzzArgs) Kind() string { return "fuzz" }

// FuzzEnqueue holds Enqueue to its contract on any input: it refuses the
// job with ErrInvalidPayload or ErrInvalidOption, creating nothing, or
// stores every string as given, byte for byte; it never passes on a
// database error. Strings that are UTF-8 without NUL, within the options'
// lengths, must be stored.
func FuzzEnqueue(f *testing.F) {
	long := strings.Repeat("é", 1<<19) // a megabyte
	for _, s := range []string{
		"", "Travis", "a\x00b", "\x00", "ok\xff", "\xff", "\xfe\xff",
		"\xed\xa0\x80", "\xed\xbf\xbf", "\xed\xa0\xbd\xed\xb8\x80", // surrogates written as UTF-8, alone and paired
		"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xf0\x80\x80\x80", // overlong encodings
		"\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", // beyond U+10FFFF
		"\ufffd", "\\u0000", `\ud800`, "\u2028\u2029", "<&>\"\\", "\U0001F600", "\uffff",
		long, long + "\x00", strings.Repeat("x", 129), strings.Repeat("k", 513),
	} {
		f.Add(s, s, s, s, s, []byte(nil))
		f.Add("field", "corr", s, "q", "claim", []byte(nil))
		f.Add(s, "", "", "", "", []byte(nil))
	}
	for _, raw := range []string{`"\u0000"`, `"\ud800"`, `"\ud83d\ude00"`, `"\ufffd"`, `1e999999`, `1e131071`,
		`0.0001e-16380`, `{"a":[1,2.5,-3e4,null,true]}`, "\"\xff\"", `{"a":1,"a":2}`, `-0`, `[]`} {
		f.Add("x", "c", "k", "q", "a", []byte(raw))
	}

	db := pgtest.New(f)
	reg := queue.NewRegistry()
	require.NoError(f, queue.Register(reg, nopHandler[fuzzArgs]()))
	c, err := queue.NewClient(db.Gorm, reg, quiet())
	require.NoError(f, err)
	ctx := context.Background()
	require.NoError(f, c.Migrate(ctx))
	var n atomic.Int64

	f.Fuzz(func(t *testing.T, field, corr, key, q, claim string, raw []byte) {
		args := fuzzArgs{S: field, M: map[string]string{field: claim}, Raw: raw}
		auth := queue.Auth{"claim": claim, "k:" + claim: []any{claim}}
		key = fmt.Sprint(n.Add(1), ":", key) // unique, so no job is a duplicate
		opts := []queue.EnqueueOption{queue.IdempotencyKey(key), queue.AuthContext(auth)}
		if corr != "" {
			opts = append(opts, queue.CorrelationID(corr))
		}
		if q != "" {
			opts = append(opts, queue.OnQueue(q))
		}
		res, err := c.Enqueue(ctx, args, opts...)
		if err != nil {
			require.True(t, errors.Is(err, queue.ErrInvalidPayload) || errors.Is(err, queue.ErrInvalidOption),
				"an error of the door, not of the database: %v", err)
			var pe interface{ SQLState() string }
			require.False(t, errors.As(err, &pe), "no database error in the chain: %v", err)
			fine := func(s string, most int) bool {
				return len(s) <= most && utf8.ValidString(s) && !strings.Contains(s, "\x00")
			}
			require.False(t, len(raw) == 0 && fine(field, 1<<30) && fine(claim, 1<<30) && fine(corr, 512) &&
				fine(key, 512) && fine(q, 128), "refused text PostgreSQL stores as given: %v", err)
			return
		}
		rec, err := c.Get(ctx, res.Job.ID)
		require.NoError(t, err)
		var back fuzzArgs
		require.NoError(t, json.Unmarshal(rec.Payload, &back))
		require.True(t, back.S == field, "args field stored altered")
		require.Equal(t, args.M, back.M)
		require.Equal(t, key, *rec.IdempotencyKey)
		if corr != "" {
			require.Equal(t, corr, *rec.CorrelationID)
		}
		if q != "" {
			require.Equal(t, q, rec.Queue)
		}
		require.Equal(t, queue.Auth{"claim": claim, "k:" + claim: []any{claim}}, rec.Auth)
		if len(raw) > 0 { // jsonb keeps the value, not the text: compare values
			require.Equal(t, jsonValue(t, raw), jsonValue(t, back.Raw))
		}
	})
}

// jsonValue decodes JSON with its numbers as exact fractions.
func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	var exact func(v any) any
	exact = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(string(v))
			require.True(t, ok, v)
			return r.String()
		case []any:
			for i := range v {
				v[i] = exact(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = exact(v[k])
			}
		}
		return v
	}
	return exact(v)
}
