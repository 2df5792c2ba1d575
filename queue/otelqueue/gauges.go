package otelqueue

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sheaf-dev/sheaf/queue"
)

// gauges reports what the databases of the watched clients hold, read at
// collection time and reused for an interval.
type gauges struct {
	interval time.Duration

	jobs, paused, pending, missed metric.Int64ObservableGauge
	oldest                        metric.Float64ObservableGauge
	limitUse                      metric.Float64ObservableGauge

	mu      sync.Mutex
	watched map[int]*watch
	nextID  int
}

// watch is a watched client and what was last read from its database.
type watch struct {
	c *queue.Client

	mu   sync.Mutex // held while reading, so that collections at once read once
	at   time.Time  // when snap was read; zero before the first read
	snap snapshot
}

// snapshot is what one read of a database found.
type snapshot struct {
	queues  []queue.QueueInfo
	pending map[string]int64 // by rule
	missed  map[string]int   // by schedule
	limits  []queue.LimitUse
	err     error
}

func (g *gauges) init(m metric.Meter, interval time.Duration) error {
	g.interval, g.watched = interval, map[int]*watch{}
	var errs [6]error
	g.jobs, errs[0] = m.Int64ObservableGauge("sheaf.queue.jobs", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs in the database, by queue and status."))
	g.oldest, errs[1] = m.Float64ObservableGauge("sheaf.queue.oldest_due.age", metric.WithUnit(durationUnit),
		metric.WithDescription("How long the longest-waiting due QUEUED job of each queue has waited; 0 if none is due."))
	g.paused, errs[2] = m.Int64ObservableGauge("sheaf.queue.paused", metric.WithUnit("{queue}"),
		metric.WithDescription("1 for a paused queue, 0 for one that runs."))
	g.pending, errs[3] = m.Int64ObservableGauge("sheaf.queue.dependency.pending", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs of a dependency rule's parent kinds that are QUEUED or PROCESSING: the rule's children wait for them."))
	g.missed, errs[4] = m.Int64ObservableGauge("sheaf.queue.schedule.missed_ticks", metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks of each schedule that were due more than a minute ago and have not fired."))
	g.limitUse, errs[5] = m.Float64ObservableGauge("sheaf.queue.limit.use", metric.WithUnit("1"),
		metric.WithDescription("How much of each limit across the runners is used: running over its concurrency, or started "+
			"in its period over its rate, whichever is more (of its busiest key, for a key limit); 1 when it holds jobs back."))
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	_, err := m.RegisterCallback(g.observe, g.jobs, g.oldest, g.paused, g.pending, g.missed, g.limitUse)
	return err
}

// Watch makes the gauges report what c's database holds: jobs by queue and
// status (sheaf.queue.jobs), how long each queue's oldest due job has
// waited (sheaf.queue.oldest_due.age), paused queues (sheaf.queue.paused),
// jobs that dependency rules wait for (sheaf.queue.dependency.pending, by
// rule) and missed schedule ticks (sheaf.queue.schedule.missed_ticks, by
// schedule). They are read when the meter collects, at most once per
// WithGaugeInterval: a collection within the interval after a read reuses
// it. A read runs Client.Queues (one pass over the jobs table), and, if the
// registry has dependency rules, Client.Stats (another); schedules are read
// from their own small table. Watch one client per database. The returned
// function stops watching.
func (t *Telemetry) Watch(c *queue.Client) (stop func()) {
	g := &t.gauges
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.nextID
	g.nextID++
	g.watched[id] = &watch{c: c}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			delete(g.watched, id)
		})
	}
}

func (g *gauges) observe(ctx context.Context, o metric.Observer) error {
	g.mu.Lock()
	ws := make([]*watch, 0, len(g.watched))
	for _, w := range g.watched {
		ws = append(ws, w)
	}
	g.mu.Unlock()
	var errs []error
	for _, w := range ws {
		s := w.read(ctx, g.interval)
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		for _, q := range s.queues {
			dest := AttrDestination.String(q.Name)
			for _, st := range queue.Statuses() {
				o.ObserveInt64(g.jobs, q.Counts[st], metric.WithAttributes(dest, AttrStatus.String(string(st))))
			}
			o.ObserveFloat64(g.oldest, q.OldestDue.Seconds(), metric.WithAttributes(dest))
			paused := int64(0)
			if q.Paused {
				paused = 1
			}
			o.ObserveInt64(g.paused, paused, metric.WithAttributes(dest))
		}
		for rule, n := range s.pending {
			o.ObserveInt64(g.pending, n, metric.WithAttributes(AttrRule.String(rule)))
		}
		for sched, n := range s.missed {
			o.ObserveInt64(g.missed, int64(n), metric.WithAttributes(AttrSchedule.String(sched)))
		}
		for _, l := range s.limits {
			o.ObserveFloat64(g.limitUse, limitUse(l), metric.WithAttributes(AttrLimit.String(string(l.Scope)+" "+l.Target)))
		}
	}
	return errors.Join(errs...)
}

// read returns what w's database held at most interval ago, reading it
// again if it is older.
func (w *watch) read(ctx context.Context, interval time.Duration) snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.at.IsZero() && time.Since(w.at) < interval {
		return w.snap
	}
	w.snap, w.at = readSnapshot(ctx, w.c), time.Now()
	return w.snap
}

func readSnapshot(ctx context.Context, c *queue.Client) snapshot {
	var s snapshot
	if s.queues, s.err = c.Queues(ctx); s.err != nil {
		return s
	}
	if s.limits, s.err = c.Limits(ctx); s.err != nil {
		return s
	}
	reg := c.Registry()
	if rules := reg.Rules(); len(rules) > 0 {
		stats, err := c.Stats(ctx)
		if err != nil {
			s.err = err
			return s
		}
		s.pending = make(map[string]int64, len(rules))
		for _, ru := range rules {
			var n int64
			for _, k := range ru.Parents {
				n += stats.ByKind[k][queue.StatusQueued] + stats.ByKind[k][queue.StatusProcessing]
			}
			s.pending[ru.Name] = n
		}
	}
	if len(reg.Schedules()) > 0 {
		states, err := c.ScheduleStates(ctx)
		if err != nil {
			s.err = err
			return s
		}
		s.missed = make(map[string]int, len(states))
		for _, st := range states {
			s.missed[st.Name] = st.MissedTicks
		}
	}
	return s
}

// limitUse is how much of l is used: the larger of its running jobs over
// its concurrency and its starts over its rate.
func limitUse(l queue.LimitUse) float64 {
	var u float64
	if l.Concurrency > 0 {
		u = float64(l.Running) / float64(l.Concurrency)
	}
	if l.Rate > 0 {
		u = max(u, float64(l.Started)/float64(l.Rate))
	}
	return u
}
