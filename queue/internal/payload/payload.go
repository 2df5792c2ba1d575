// Package payload checks JSON before it reaches the database: what
// PostgreSQL's jsonb would refuse (bytes that are not UTF-8, the escape
// \u0000, an unpaired surrogate escape, a number outside numeric's range),
// and strings encoding/json would store altered. Package queue wraps what
// it finds in its own errors (ErrInvalidPayload), naming the field.
package payload

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"unicode/utf8"
)

// A Flaw is something in encoded JSON that jsonb refuses.
type Flaw struct {
	At   int // byte offset
	What string
}

// Scan returns the first thing in b, JSON that encoding/json has
// checked, that jsonb refuses: bytes that are not UTF-8, the escape
// \u0000, an unpaired surrogate escape, a number outside numeric's range.
// replaced reports an escape \ufffd before it: encoding/json writes one for
// each byte that is not UTF-8 in a string it encodes, and for nothing else,
// so there may be a string that it silently changed.
//
// It is on the path of every job enqueued, so it skips from quote to quote
// and backslash to backslash with bytes.IndexByte, and looks at every byte
// only between strings, where JSON is short punctuation and numbers.
func Scan(b []byte) (flaw Flaw, found, replaced bool) {
	if !utf8.Valid(b) {
		at := 0
		for r, n := utf8.DecodeRune(b); r != utf8.RuneError || n != 1; r, n = utf8.DecodeRune(b[at:]) {
			at += n
		}
		return Flaw{at, "invalid UTF-8"}, true, false
	}
	i := 0
	for i < len(b) {
		q := bytes.IndexByte(b[i:], '"')
		end := len(b)
		if q >= 0 {
			end = i + q
		}
		if f, ok := scanNumbers(b, i, end); ok {
			return f, true, replaced
		}
		if q < 0 {
			break
		}
		// A string from end+1 to its closing quote. next is the first
		// quote at or after i, recomputed only once an escape passes it.
		i = end + 1
		next := -1
		for {
			if next < i {
				k := bytes.IndexByte(b[i:], '"')
				if k < 0 {
					return Flaw{}, false, replaced // unterminated: not JSON
				}
				next = i + k
			}
			k := bytes.IndexByte(b[i:next], '\\')
			if k < 0 {
				i = next + 1
				break
			}
			i += k
			if i+6 > len(b) || b[i+1] != 'u' {
				i += 2
				continue
			}
			r := hex4(b[i+2 : i+6])
			switch {
			case r == 0:
				return Flaw{i, "escape \\u0000 (NUL)"}, true, replaced
			case r == 0xfffd:
				replaced = true
			case r >= 0xd800 && r < 0xdc00:
				if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if lo := hex4(b[i+8 : i+12]); lo >= 0xdc00 && lo < 0xe000 {
						i += 12
						continue
					}
				}
				return Flaw{i, "unpaired surrogate escape " + string(b[i:i+6])}, true, replaced
			case r >= 0xdc00 && r < 0xe000:
				return Flaw{i, "unpaired surrogate escape " + string(b[i:i+6])}, true, replaced
			}
			i += 6
		}
	}
	return Flaw{}, false, replaced
}

// hex4 decodes four hex digits; -1 if they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanNumbers checks the numbers in b[from:to], JSON outside strings.
func scanNumbers(b []byte, from, to int) (Flaw, bool) {
	digits := func(j int) int {
		for j < to && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		return j
	}
	for j := from; j < to; {
		if c := b[j]; c != '-' && (c < '0' || c > '9') {
			j++
			continue
		}
		start := j
		if b[j] == '-' {
			j++
		}
		intStart := j
		j = digits(j)
		whole := b[intStart:j]
		var frac []byte
		if j < to && b[j] == '.' {
			j++
			fracStart := j
			j = digits(j)
			frac = b[fracStart:j]
		}
		exp := 0
		if j < to && (b[j] == 'e' || b[j] == 'E') {
			j++
			neg := j < to && b[j] == '-'
			if j < to && (b[j] == '-' || b[j] == '+') {
				j++
			}
			expStart := j
			j = digits(j)
			for _, c := range b[expStart:j] {
				if exp < 1<<30 { // saturate: anything this large is refused
					exp = exp*10 + int(c-'0')
				}
			}
			if neg {
				exp = -exp
			}
		}
		if numericOverflows(whole, frac, exp) {
			return Flaw{start, fmt.Sprintf("number %.40s outside PostgreSQL's numeric range", b[start:j])}, true
		}
	}
	return Flaw{}, false
}

// numericOverflows reports whether PostgreSQL's numeric refuses the number
// whole.frac × 10^exp ("value overflows numeric format"): an exponent of
// 2^30 or more either way, more than 16,383 digits after the point, or a
// first significant digit at 10^131072 or beyond.
func numericOverflows(whole, frac []byte, exp int) bool {
	const maxExp, maxScale, maxWeight = 1<<30 - 1, 16383, 131071
	if exp >= maxExp || exp <= -maxExp || len(frac)-exp > maxScale {
		return true
	}
	if i := bytes.IndexFunc(whole, func(r rune) bool { return r != '0' }); i >= 0 {
		return len(whole)-i-1+exp > maxWeight
	}
	if i := bytes.IndexFunc(frac, func(r rune) bool { return r != '0' }); i >= 0 {
		return -i-1+exp > maxWeight
	}
	return false // zero
}

// Check says what in enc, v encoded by encoding/json, jsonb would refuse,
// or which string of v that is not UTF-8 encoding/json replaced: the part
// of v at fault, from root ("args", "auth"), and what is wrong with it. It
// returns "" when there is nothing. Finding the part is slow, but only
// input to refuse, or with an escape \ufffd, comes to it.
//
// plain says that v's type is Plain, so that JSON without an escape needs
// no scan: the common case, in a few nanoseconds.
func Check(root string, v any, enc []byte, plain bool) string {
	if plain && bytes.IndexByte(enc, '\\') < 0 && utf8.Valid(enc) {
		return ""
	}
	f, found, replaced := Scan(enc)
	if !found && !replaced {
		return ""
	}
	if path, what := findFlaw(reflect.ValueOf(v), root); path != "" {
		return path + ": " + what
	}
	if found {
		return fmt.Sprintf("%s: %s at offset %d of its JSON", root, f.What, f.At)
	}
	return "" // the escape \ufffd was written as such by a MarshalJSON
}

// Plain reports whether encoding/json writes every value of t by
// itself: t holds no type with its own MarshalJSON or MarshalText, no
// json.Number and no interface (whose value may be any of those). The
// numbers it writes are then Go's, which numeric always holds, so its JSON
// needs scanning only if it has an escape or bytes that are not UTF-8.
// Package queue asks it once per kind, at Register.
func Plain(t reflect.Type) bool { return isPlain(t, map[reflect.Type]bool{}) }

func isPlain(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == nil || seen[t] {
		return true // nil has no value; a recursive type is judged by the rest of it
	}
	seen[t] = true
	for _, m := range []reflect.Type{marshalerType, textMarshalerType} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Interface:
		return false
	case reflect.String:
		return t != numberType
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return isPlain(t.Elem(), seen)
	case reflect.Map:
		return isPlain(t.Key(), seen) && isPlain(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Tag.Get("json") != "-" && (sf.IsExported() || sf.Anonymous) && !isPlain(sf.Type, seen) {
				return false
			}
		}
	}
	return true
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	numberType        = reflect.TypeFor[json.Number]()
)

// findFlaw walks v as encoding/json encodes it and returns the path of the
// first string PostgreSQL would refuse, or that encoding/json would alter,
// and what is wrong with it; "" if none. A value with its own MarshalJSON
// or MarshalText is judged by what that writes. v has been encoded before,
// so it has no cycles.
func findFlaw(v reflect.Value, path string) (where, what string) {
	if !v.IsValid() || (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return "", ""
	}
	if m, ok := implementer(v, marshalerType); ok {
		if b, err := m.(json.Marshaler).MarshalJSON(); err == nil {
			if f, found, _ := Scan(b); found {
				return path, fmt.Sprintf("%s at offset %d of what its MarshalJSON writes", f.What, f.At)
			}
		}
		return "", ""
	}
	if m, ok := implementer(v, textMarshalerType); ok {
		if b, err := m.(encoding.TextMarshaler).MarshalText(); err == nil {
			if flaw := TextFlaw(string(b)); flaw != "" {
				return path, flaw + " in what its MarshalText writes"
			}
		}
		return "", ""
	}
	t := v.Type()
	switch v.Kind() {
	case reflect.String:
		if t == numberType {
			if f, found, _ := Scan([]byte(v.String())); found {
				return path, f.What
			}
		} else if flaw := TextFlaw(v.String()); flaw != "" {
			return path, flaw
		}
	case reflect.Pointer, reflect.Interface:
		return findFlaw(v.Elem(), path)
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Tag.Get("json") == "-" || !sf.IsExported() && !sf.Anonymous {
				continue // not encoded
			}
			if where, what := findFlaw(v.Field(i), path+"."+sf.Name); where != "" {
				return where, what
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			name := fmt.Sprint(k)
			if k.Kind() == reflect.String {
				name = k.String()
			} else if m, ok := implementer(k, textMarshalerType); ok {
				b, _ := m.(encoding.TextMarshaler).MarshalText()
				name = string(b)
			}
			if flaw := TextFlaw(name); flaw != "" {
				return path, fmt.Sprintf("key %q: %s", name, flaw)
			}
			if where, what := findFlaw(v.MapIndex(k), fmt.Sprintf("%s[%q]", path, name)); where != "" {
				return where, what
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return "", "" // base64
		}
		for i := range v.Len() {
			if where, what := findFlaw(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); where != "" {
				return where, what
			}
		}
	}
	return "", ""
}

// implementer returns v, or its address, as the iface encoding/json would
// call on it.
func implementer(v reflect.Value, iface reflect.Type) (any, bool) {
	if !v.CanInterface() {
		return nil, false
	}
	if v.Type().Implements(iface) {
		return v.Interface(), true
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(v.Type()).Implements(iface) {
		return v.Addr().Interface(), true
	}
	return nil, false
}
