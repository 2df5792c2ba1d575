package payload

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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
		require.Equal(t, want, TextFlaw(s), "%q", s)
	}
}

func TestStorable(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]string{
		"plain":     "plain",
		"a\x00b":    "a\ufffdb",
		"ok\xff":    "ok\ufffd",
		"\xff\x00é": "\ufffd\ufffdé",
	} {
		require.Equal(t, want, Storable(s), "%q", s)
		require.Empty(t, TextFlaw(Storable(s)))
	}
}
