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

// view shows rec.
func (c *console) view(rec *queue.JobRecord) jobView {
	return jobview.Of(rec, c.args(rec.Kind, rec.Payload))
}

// views shows recs.
func (c *console) views(recs []queue.JobRecord) []jobView { return jobview.All(recs, c.args) }

// args passes a job's arguments through the ArgsFormatter.
func (c *console) args(kind string, payload json.RawMessage) json.RawMessage {
	if c.cfg.formatArgs != nil {
		return c.cfg.formatArgs(kind, payload)
	}
	return payload
}
