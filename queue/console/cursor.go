package console

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// Cursors are opaque to clients: base64url of a small JSON object, which
// the server may change between releases (a client only hands back what it
// was given). Each listing has its own type.

func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads the cursor param into v, refusing what the server did
// not write.
func decodeCursor(param, s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return badParam(param, "not a cursor this server wrote")
	}
	return nil
}

// jobCursor is where a listing of jobs continues: before the last job of
// the previous page, since jobs are listed newest first (queue.Filter's
// Newest and BeforeID).
//
// This and its two functions below are the one place that knows how jobs
// are paged. Cursors of the ascending listing this server once wrote (a
// JSON field "a") have no Before, and are refused.
type jobCursor struct {
	Before int64 `json:"b"`
}

// pageJobs sets f to list the page that starts at cur (nil: the first),
// newest first.
func pageJobs(f *queue.Filter, cur *jobCursor) error {
	f.Newest = true
	if cur != nil {
		if cur.Before < 1 {
			return badParam("cursor", "not a cursor this server wrote (jobs are listed newest first now; start again without one)")
		}
		f.BeforeID = cur.Before
	}
	return nil
}

// nextJobs is the cursor of the page after one that ended at last.
func nextJobs(last queue.JobRecord) jobCursor { return jobCursor{Before: last.ID} }

// runCursor is where a listing of runs continues: after the last run of the
// previous page (Client.Runs's order).
type runCursor struct {
	First time.Time `json:"f"`
	RunID string    `json:"r"`
}
