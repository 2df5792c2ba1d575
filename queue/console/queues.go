package console

import (
	"context"
	"net/http"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// queueView is a queue at a glance.
type queueView struct {
	Name string `json:"name"`
	// Counts counts its jobs by status; a status without jobs has no entry.
	Counts map[queue.Status]int64 `json:"counts"`
	// OldestDueSeconds is how long its longest-waiting due QUEUED job has
	// waited; 0 if none is due.
	OldestDueSeconds float64 `json:"oldest_due_seconds"`
	// Paused says whether runners leave its jobs alone, since PausedAt.
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at"`
}

type queuesResponse struct {
	Queues []queueView `json:"queues"`
	// AsOf is when the queues were read: they are reused for a few
	// seconds (console.WithCountsCache), but for this console's own
	// pauses and resumes.
	AsOf time.Time `json:"as_of"`
}

type queueResponse struct {
	Queue queueView `json:"queue"`
}

func (c *console) queueRoutes() []route {
	return []route{
		{Method: "GET", Pattern: "/api/queues", Action: ActionRead, Response: queuesResponse{},
			Summary: "Every queue that has jobs or is paused: its jobs by status, how long its oldest due job has waited, " +
				"whether it is paused (reads the whole table, at most once every few seconds: see as_of).",
			handle: c.listQueues},
		{Method: "POST", Pattern: "/api/queues/{name}/pause", Action: ActionPause, Response: queueResponse{},
			Summary: "Pause a queue: runners everywhere stop claiming its jobs within a poll interval; those running " +
				"finish, and new ones wait QUEUED. Pausing a paused queue changes nothing.",
			handle: c.pauseQueue(true)},
		{Method: "POST", Pattern: "/api/queues/{name}/resume", Action: ActionPause, Response: queueResponse{},
			Summary: "Resume a paused queue: runners claim its jobs again within a poll interval.",
			handle:  c.pauseQueue(false)},
	}
}

func (c *console) listQueues(r *http.Request, _ Access) (int, any, error) {
	qs, at, err := c.queuesCache.get(r.Context(), c.cfg.countsTTL, c.client.Queues)
	if err != nil {
		return 0, nil, err
	}
	out := queuesResponse{Queues: make([]queueView, 0, len(qs)), AsOf: at}
	for _, q := range qs {
		out.Queues = append(out.Queues, queueOf(q))
	}
	return http.StatusOK, out, nil
}

func queueOf(q queue.QueueInfo) queueView {
	return queueView{Name: q.Name, Counts: q.Counts, OldestDueSeconds: q.OldestDue.Seconds(), Paused: q.Paused, PausedAt: q.PausedAt}
}

// pauseQueue serves pausing (pause) or resuming the queue of the path, and
// answers with the queue as it is then.
func (c *console) pauseQueue(pause bool) handlerFunc {
	do, action := c.client.PauseQueue, "pause"
	if !pause {
		do, action = c.client.ResumeQueue, "resume"
	}
	return func(r *http.Request, _ Access) (int, any, error) {
		name := r.PathValue("name")
		if err := checkParam("name", name); err != nil {
			return 0, nil, err
		}
		ch := changeOf(r)
		ch.action, ch.target = action, map[string]any{"queue": name}
		if err := do(r.Context(), name); err != nil {
			return 0, nil, err
		}
		c.queuesCache.clear()
		v, err := c.queue(r.Context(), name)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, queueResponse{Queue: v}, nil
	}
}

// queue returns the view of the queue name; one with no jobs that is not
// paused is not among Client.Queues, and is empty.
func (c *console) queue(ctx context.Context, name string) (queueView, error) {
	qs, err := c.client.Queues(ctx)
	if err != nil {
		return queueView{}, err
	}
	for _, q := range qs {
		if q.Name == name {
			return queueOf(q), nil
		}
	}
	return queueView{Name: name, Counts: map[queue.Status]int64{}}, nil
}
