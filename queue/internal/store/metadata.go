package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// A job's metadata is a map of strings, stored in the meta column as
// bytes (version 6's metadata column held it as JSON). Most jobs that have any carry only the W3C traceparent of the
// call that enqueued them, and that one value goes into every row of a
// bulk enqueue, is rewritten with the row by the claim and the completion,
// and is read back by every claim. So a traceparent of version 00 is kept
// in 26 bytes instead of some 80 of JSON:
//
//	0x00 | trace ID (16) | span ID (8) | flags (1) | JSON object of the other keys, if any
//
// Anything else is a JSON object of strings, which never starts with 0x00.

const (
	traceKey    = "traceparent"
	traceMark   = 0x00
	traceSize   = 1 + 16 + 8 + 1
	traceHeader = 55 // len("00-" + 32 + "-" + 16 + "-" + 2)
)

// EncodeMetadata encodes m for the metadata column; nil for an empty m.
func EncodeMetadata(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	tp, ok := m[traceKey]
	var b []byte
	if ok {
		b = compactTraceparent(tp)
	}
	if b == nil {
		out, _ := json.Marshal(m) // a map of strings always encodes
		return out
	}
	if len(m) == 1 {
		return b
	}
	rest := maps.Clone(m)
	delete(rest, traceKey)
	out, _ := json.Marshal(rest)
	return append(b, out...)
}

// ErrMetadata is returned for metadata that does not decode.
var ErrMetadata = errors.New("metadata is neither a JSON object of strings nor a compact traceparent")

// DecodeMetadata reads what EncodeMetadata wrote: nil for empty bytes.
func DecodeMetadata(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != traceMark {
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, errors.Join(ErrMetadata, err)
		}
		return m, nil
	}
	if len(b) < traceSize {
		return nil, ErrMetadata
	}
	var m map[string]string
	if len(b) > traceSize {
		if err := json.Unmarshal(b[traceSize:], &m); err != nil {
			return nil, errors.Join(ErrMetadata, err)
		}
	}
	if m == nil {
		m = make(map[string]string, 1)
	}
	m[traceKey] = expandTraceparent(b[:traceSize])
	return m, nil
}

// compactTraceparent returns tp in traceSize bytes, or nil unless tp is a
// version 00 traceparent that expandTraceparent gives back as it was:
// lowercase hex in the header's places.
func compactTraceparent(tp string) []byte {
	if len(tp) != traceHeader || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return nil
	}
	b := make([]byte, traceSize, traceSize+64)
	b[0] = traceMark
	for i, part := range [...]string{tp[3:35], tp[36:52], tp[53:55]} {
		for j := range len(part) {
			if c := part[j]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return nil
			}
		}
		at := [...]int{1, 17, 25}[i]
		if _, err := hex.Decode(b[at:], []byte(part)); err != nil {
			return nil
		}
	}
	return b
}

// expandTraceparent writes the traceparent b holds.
func expandTraceparent(b []byte) string {
	var out [traceHeader]byte
	copy(out[:], "00-")
	hex.Encode(out[3:35], b[1:17])
	out[35] = '-'
	hex.Encode(out[36:52], b[17:25])
	out[52] = '-'
	hex.Encode(out[53:55], b[25:26])
	return string(out[:])
}

// ScanMetadata reads metadata as a driver returns the column: nil, bytes
// or text.
func ScanMetadata(src any) (map[string]string, error) {
	switch v := src.(type) {
	case nil:
		return nil, nil
	case []byte:
		return DecodeMetadata(v)
	case string:
		return DecodeMetadata([]byte(v))
	}
	return nil, fmt.Errorf("cannot scan %T into Metadata", src)
}
