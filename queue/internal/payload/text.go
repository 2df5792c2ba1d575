package payload

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// TextFlaw says what in s PostgreSQL would not store as text: a NUL byte or
// bytes that are not UTF-8. It returns "" when there is nothing.
func TextFlaw(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return ""
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0:
			return fmt.Sprintf("NUL byte at offset %d", i)
		case r == utf8.RuneError && n == 1:
			return fmt.Sprintf("invalid UTF-8 at offset %d", i)
		}
		i += n
	}
	return ""
}

// Storable returns s with what PostgreSQL would not store as text replaced
// by U+FFFD: for text that is not input to refuse, but output to keep, such
// as a handler's error message.
func Storable(s string) string {
	if TextFlaw(s) == "" {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// KindOf asks the zero A for its kind, so that a kind is known without a
// value, and says what is wrong with it: a panic (A is a pointer, say), or
// a name that is not 1 to 200 bytes of text.
func KindOf[A interface{ Kind() string }]() (kind, flaw string) {
	defer func() {
		if p := recover(); p != nil {
			kind, flaw = "", fmt.Sprintf("%v.Kind() panics on the zero value (use a non-pointer payload type): %v", reflect.TypeFor[A](), p)
		}
	}()
	var zero A
	kind = zero.Kind()
	if kind == "" || len(kind) > 200 {
		return "", fmt.Sprintf("%v.Kind() must return 1 to 200 bytes, got %q", reflect.TypeFor[A](), kind)
	}
	if f := TextFlaw(kind); f != "" {
		return "", fmt.Sprintf("%v.Kind() returns %q: %s", reflect.TypeFor[A](), kind, f)
	}
	return kind, ""
}
