package console

import (
	"encoding/json"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/jobview"
)

// The API shows jobs as package jobview does, as the sheaf command prints
// them: never their auth context, their arguments through the
// ArgsFormatter.
type (
	jobView      = jobview.Job
	attemptView  = jobview.Attempt
	progressView = jobview.Progress
)

// view shows rec, with its chunks if its kind is chunked.
func (c *console) view(rec *queue.JobRecord) jobView {
	v := jobview.Of(rec, c.args(rec.Kind, rec.Payload))
	if size, ok := c.reg.ChunkSize(rec.Kind); ok {
		v.Progress.SetChunks(size, rec.StartedAt, rec.CompletedAt)
	}
	return v
}

// views shows recs.
func (c *console) views(recs []queue.JobRecord) []jobView {
	out := make([]jobView, len(recs))
	for i := range recs {
		out[i] = c.view(&recs[i])
	}
	return out
}

// args passes a job's arguments through the ArgsFormatter.
func (c *console) args(kind string, payload json.RawMessage) json.RawMessage {
	if c.cfg.formatArgs != nil {
		return c.cfg.formatArgs(kind, payload)
	}
	return payload
}
