package payload

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// Scan agrees with PostgreSQL on what jsonb refuses, among JSON that
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
			_, _, _ = Scan([]byte(in)) // must not panic, whatever it says
			continue
		}
		_, found, _ := Scan([]byte(in))
		err := db.SQL.QueryRow("SELECT $1::text::jsonb IS NOT NULL", in).Scan(new(bool))
		require.Equal(t, err != nil, found, "%.60s: PostgreSQL says %v", in, err)
	}
}

// FuzzScanJSON holds Scan to PostgreSQL's word: of JSON that
// encoding/json accepts, it finds something exactly when jsonb refuses it.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `"\u0000"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `1e131071`,
		`0.0001e-16380`, `[1.5e-16382, -0, 0e99]`, `{"k\u00e9":[true,null]}`} {
		f.Add([]byte(s))
	}
	db := pgtest.New(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, found, _ := Scan(b)
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
		f, found, replaced := Scan([]byte(tc.in))
		require.Equal(t, tc.at >= 0, found, tc.in)
		if found {
			require.Equal(t, tc.at, f.At, tc.in)
		}
		require.Equal(t, tc.replaced, replaced, tc.in)
	}
	// Many escapes in one long string take linear time: each backslash is
	// looked for once, and the closing quote again only past an escaped
	// one. Looking for the quote from every escape would take minutes here.
	long := `"` + strings.Repeat(`\n\"x`, 1<<18) + `"`
	_, found, _ := Scan([]byte(long))
	require.False(t, found)
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
		{plainArgs{}, true}, {recursive{}, true}, {hidden{raw: json.RawMessage(`1`)}, true}, {&recursive{}, true},
		{map[string][]int{}, true}, {[2]float64{}, true},
		{withRaw{}, false}, {withText{}, false}, {withPtrMarshaler{}, false}, {map[string]any{}, false},
		{json.Number(""), false}, {[]ownText{}, false}, {map[ownText]int{}, false},
	} {
		v, want := tc.v, tc.want
		require.Equal(t, want, Plain(reflect.TypeOf(v)), "%T", v)
	}
}

type plainArgs struct {
	County string            `json:"county"`
	Tags   map[string]string `json:"tags"`
}

type textKey struct{ M map[ownText]string }

type badJSON struct{}

func (badJSON) MarshalJSON() ([]byte, error) { return []byte(`"\u0000"`), nil }

type replacing struct{}

func (replacing) MarshalJSON() ([]byte, error) { return []byte(`"\ufffd"`), nil }

// Check names the part of the value at fault, from the root it is given,
// and says nothing of JSON jsonb stores as given.
func TestCheckNamesThePart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v     any
		plain bool
		want  string
	}{
		{plainArgs{County: "Travis"}, true, ""},
		{plainArgs{County: "a\x00"}, true, "args.County: NUL byte at offset 1"},
		{plainArgs{Tags: map[string]string{"k": "ok\xff"}}, true, `args.Tags["k"]: invalid UTF-8 at offset 2`},
		{plainArgs{Tags: map[string]string{"k\x00": ""}}, true, `args.Tags: key "k\x00": NUL byte at offset 1`},
		{[]string{"x", "\xff"}, false, "args[1]: invalid UTF-8 at offset 0"},
		{textKey{M: map[ownText]string{"k\xff": ""}}, false, `args.M: key "k\xff": invalid UTF-8 at offset 1`},
		{withText{T: "a\x00"}, false, "args.T: NUL byte at offset 1 in what its MarshalText writes"},
		{struct{ B badJSON }{}, false, "args.B: escape \\u0000 (NUL) at offset 1 of what its MarshalJSON writes"},
		{json.Number("1e999999"), false, "args: number 1e999999 outside PostgreSQL's numeric range"},
		{replacing{}, false, ""},
		{json.RawMessage(`"\u0000"`), false, "args: escape \\u0000 (NUL) at offset 1 of what its MarshalJSON writes"},
	} {
		enc, err := json.Marshal(tc.v)
		require.NoError(t, err)
		require.Equal(t, tc.want, Check("args", tc.v, enc, tc.plain), "%#v", tc.v)
	}
	// What the walk cannot place is named by the root and its offset.
	require.Equal(t, "auth: escape \\u0000 (NUL) at offset 1 of its JSON", Check("auth", nil, []byte(`"\u0000"`), false))
}
