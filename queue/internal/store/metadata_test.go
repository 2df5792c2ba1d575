package store_test

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Metadata decodes to what was encoded, a traceparent of version 00 in 26
// bytes and anything else as JSON.
func TestMetadataRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    map[string]string
		size int // of the encoding, if compact; 0 for JSON's, -1 for a compact traceparent and JSON
	}{
		{"traceparent", map[string]string{"traceparent": tp}, 26},
		{"traceparent and more", map[string]string{"traceparent": tp, "tracestate": "congo=t61rcWkgMzE", "sheaf.parents": tp + " " + tp}, -1},
		{"upper-case hex", map[string]string{"traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"}, 0},
		{"later version", map[string]string{"traceparent": "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"}, 0},
		{"not hex", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"}, 0},
		{"misplaced dash", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736000f067aa0ba902b7-01"}, 0},
		{"empty traceparent", map[string]string{"traceparent": ""}, 0},
		{"no traceparent", map[string]string{"sheaf.parents": tp}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := store.EncodeMetadata(tc.m)
			switch {
			case tc.size > 0:
				require.Len(t, b, tc.size)
			case tc.size < 0:
				require.Zero(t, b[0], "the traceparent compact")
				require.Equal(t, byte('{'), b[26], "the rest JSON")
			default:
				require.Equal(t, byte('{'), b[0], "JSON")
			}
			got, err := store.DecodeMetadata(b)
			require.NoError(t, err)
			require.Equal(t, tc.m, got)
		})
	}
	require.Nil(t, store.EncodeMetadata(nil))
	require.Nil(t, store.EncodeMetadata(map[string]string{}))
	m, err := store.DecodeMetadata(nil)
	require.NoError(t, err)
	require.Nil(t, m)
}

// Bytes that are not metadata are refused with ErrMetadata.
func TestMetadataRefusesWhatIsNotMetadata(t *testing.T) {
	compact := store.EncodeMetadata(map[string]string{"traceparent": tp})
	for name, b := range map[string][]byte{
		"truncated traceparent": compact[:20],
		"bad JSON after it":     append(append([]byte{}, compact...), `{"a":`...),
		"JSON of numbers":       []byte(`{"a":1}`),
		"not JSON":              []byte("traceparent"),
	} {
		_, err := store.DecodeMetadata(b)
		require.ErrorIs(t, err, store.ErrMetadata, name)
	}
}

func FuzzMetadata(f *testing.F) {
	f.Add("traceparent", tp, "tracestate", "a=b")
	f.Add("traceparent", "00-"+tp[3:], "", "")
	f.Add("x", "y", "traceparent", "00-00000000000000000000000000000000-0000000000000000-00")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m := map[string]string{k1: v1, k2: v2}
		got, err := store.DecodeMetadata(store.EncodeMetadata(m))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			if utf8.ValidString(k) && utf8.ValidString(v) {
				require.Equal(t, v, got[k], "%q of %q", k, m)
			}
		}
	})
}

// Jobs enqueued at schema version 6 keep their metadata, JSON in the
// column of that version, through the migration to version 7, which adds a
// column for it as bytes: claims and reads of whole jobs read either.
func TestReadsSeeMetadataOfVersion6(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store, db *gorm.DB) {
		ctx := context.Background()
		for _, up := range st.Migrations()[:6] {
			for _, stmt := range statements(st, up) {
				require.NoError(t, db.Exec(stmt).Error)
			}
		}
		meta := `{"traceparent": "` + tp + `", "tracestate": "a=b"}`
		require.NoError(t, db.Exec(`INSERT INTO sheaf_jobs (kind, queue, payload, metadata) VALUES ('k', 'q', '{}', ?)`, meta).Error)
		found, err := st.Migrate(ctx)
		require.NoError(t, err)
		require.Equal(t, 6, found)
		var ins []row
		require.NoError(t, st.Insert(ctx, db, []store.NewJob{{Kind: "k", Queue: "q", Priority: 5, Attempts: 1, Payload: `{}`,
			Metadata: store.EncodeMetadata(map[string]string{"traceparent": tp})}}, &ins))
		var size int
		require.NoError(t, db.Raw("SELECT length(meta) FROM sheaf_jobs WHERE id = ?", ins[0].ID).Scan(&size).Error)
		require.Equal(t, 26, size, "a job enqueued since keeps its traceparent in 26 bytes")

		// Reads of whole jobs (Get, List, a child's parents) see both.
		var read []struct {
			ID   int64
			Meta []byte
		}
		require.NoError(t, st.Jobs(ctx, db, store.Filter{}, 0, &read))
		require.Len(t, read, 2)
		for i, want := range []map[string]string{
			{"traceparent": tp, "tracestate": "a=b"}, // the job of version 6
			{"traceparent": tp},
		} {
			m, err := store.DecodeMetadata(read[i].Meta)
			require.NoError(t, err)
			require.Equal(t, want, m)
		}

		conn := st.Hold(false)
		defer conn.Close()
		got, err := conn.Claim(ctx, store.Claim{Queue: "q", N: 2, Lease: time.Minute, Runner: "r"})
		require.NoError(t, err)
		require.Len(t, got, 2)
		for _, c := range got {
			m, err := store.DecodeMetadata(c.Metadata)
			require.NoError(t, err)
			if c.ID == ins[0].ID {
				require.Equal(t, map[string]string{"traceparent": tp}, m)
			} else {
				require.Equal(t, map[string]string{"traceparent": tp, "tracestate": "a=b"}, m, "the job of version 6")
			}
		}
	})
}
