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

// jobCursor is where a listing of jobs continues: after the last job of the
// previous page.
//
// This and its two functions below are the one place that knows how jobs
// are paged: by ascending ID, with queue.Filter.AfterID. When the queue
// lists newest first (Filter.Newest, Filter.BeforeID), page there instead:
// set Newest, take Before from the last job's ID, and refuse cursors of
// the old kind (After set) with a bad-param error.
type jobCursor struct {
	After int64 `json:"a"`
}

// pageJobs sets f to list the page that starts at cur (nil: the first).
func pageJobs(f *queue.Filter, cur *jobCursor) {
	if cur != nil {
		f.AfterID = cur.After
	}
}

// nextJobs is the cursor of the page after one that ended at last.
func nextJobs(last queue.JobRecord) jobCursor { return jobCursor{After: last.ID} }

// runCursor is where a listing of runs continues: after the last run of the
// previous page (Client.Runs's order).
type runCursor struct {
	First time.Time `json:"f"`
	RunID string    `json:"r"`
}
