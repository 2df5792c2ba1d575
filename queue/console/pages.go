package console

import (
	"context"
	"encoding/json"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// How often the live parts of pages refresh, while the tab is shown.
const (
	liveSlow = 5000 // ms: counts, lists
	liveFast = 1000 // ms: a job that is running
)

// pageQuery reads a page's query as the API route with params would, but
// for the page's own parameters in extra, returned apart, and the filter
// form's empty fields, left out.
func pageQuery(r *http.Request, params []param, extra ...string) (query, url.Values, error) {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, nil, badParam("query", "%v", err)
	}
	own := url.Values{}
	for _, k := range extra {
		if v, ok := vals[k]; ok {
			own[k] = v
			delete(vals, k)
		}
	}
	for k, v := range vals {
		if len(v) == 1 && v[0] == "" {
			delete(vals, k)
		}
	}
	q, err := readQuery(vals, params)
	return q, own, err
}

// overviewData is the overview: every queue at a glance, the activity of
// the last hour and day, and the runners.
type overviewData struct {
	// Nights is the latest run of each schedule, first on the page.
	Nights  []nightView
	Queues  []queueView
	Totals  map[queue.Status]int64
	AsOf    time.Time
	Charts  []template.HTML
	Runners []runnerView
}

func (c *console) overviewHTML(r *http.Request, _ Access) (pageBody, error) {
	qs, at, err := c.queuesCache.get(r.Context(), c.cfg.countsTTL, c.client.Queues)
	if err != nil {
		return pageBody{}, err
	}
	d := overviewData{Totals: map[queue.Status]int64{}, AsOf: at}
	if d.Nights, _, err = c.nights(r.Context()); err != nil {
		return pageBody{}, err
	}
	for _, q := range qs {
		d.Queues = append(d.Queues, queueOf(q))
		for s, n := range q.Counts {
			d.Totals[s] += n
		}
	}
	if d.Charts, err = c.activityCharts(r.Context()); err != nil {
		return pageBody{}, err
	}
	rs, err := c.client.Runners(r.Context(), recent)
	if err != nil {
		return pageBody{}, err
	}
	for _, x := range rs {
		d.Runners = append(d.Runners, runnerView{ID: x.ID, Queues: x.Queues, Workers: x.Workers, StartedAt: x.StartedAt, SeenAt: x.SeenAt, Leader: x.Leader})
	}
	return pageBody{Title: "Overview", Data: d, LiveMS: liveSlow}, nil
}

// jobsData is the list of jobs, its filters and what can be done to all
// the jobs they select.
type jobsData struct {
	Form   jobsForm
	Kinds  []string
	Queues []string
	Jobs   []jobView
	// Next is the link to the next page; First is false past the first,
	// and Newest links back to it.
	Next, Newest string
	First        bool
	// Error is the filters' error; the list is empty then.
	Error *apiError
	// RetryAll and CancelAll are the bulk actions on every job the filters
	// select, nil when they would select none.
	RetryAll, CancelAll *matchAction
}

// jobsForm is the filter form as the caller filled it in.
type jobsForm struct {
	Statuses                                     []string
	Kind, Queue, Run, Period, Correlation, Q, TZ string
	Since, Until                                 string
	HasFilter                                    bool
	Values                                       url.Values
}

// matchAction is "retry (or cancel) every job that matches": the API call
// that counts them, and the filter the action sends.
type matchAction struct {
	CountURL string
	Filter   filterBody
	// Words says which jobs the action touches, for its dialog.
	Words string
}

// localLayouts are the forms of a datetime-local field.
var localLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05"}

func (c *console) jobsHTML(r *http.Request, _ Access) (pageBody, error) {
	d := jobsData{Kinds: c.reg.Kinds(), First: r.URL.Query().Get("cursor") == ""}
	body := pageBody{Title: "Jobs", Data: &d, LiveMS: liveSlow}
	if qs, _, err := c.queuesCache.get(r.Context(), c.cfg.countsTTL, c.client.Queues); err == nil {
		for _, q := range qs {
			d.Queues = append(d.Queues, q.Name)
		}
	}
	q, own, err := pageQuery(r, listParams, "tz")
	if err == nil {
		d.Form = jobsForm{Statuses: q.list("status"), Kind: q.str("kind"), Queue: q.str("queue"), Run: q.str("run"),
			Period: q.str("period"), Correlation: q.str("correlation"), Q: q.str("q"), TZ: own.Get("tz"),
			Since: q.str("since"), Until: q.str("until"), Values: q.vals}
		err = localTimes(&q, d.Form.TZ)
	}
	if err == nil {
		var page jobsResponse
		page, err = c.jobsPage(r.Context(), q)
		d.Jobs = page.Jobs
		next := r.URL.Query()
		next.Del("cursor")
		d.Newest = "jobs?" + next.Encode()
		if page.NextCursor != "" {
			next.Set("cursor", page.NextCursor)
			d.Next = "jobs?" + next.Encode()
		}
	}
	if err != nil {
		e := c.toAPIError(r, err)
		if e.Status != http.StatusBadRequest {
			return pageBody{}, err
		}
		d.Error, body.Status = e, http.StatusBadRequest
		return body, nil
	}
	f, _ := readFilter(q)
	d.RetryAll, d.CancelAll = matchActions(f, q.vals)
	d.Form.HasFilter = !filterOf(f).empty() || len(f.Statuses) > 0
	return body, nil
}

// localTimes turns the since and until of a filter form, times of day in
// the viewer's zone tz (a datetime-local field), into RFC 3339; RFC 3339
// times stay as they are.
func localTimes(q *query, tz string) error {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || checkParam("tz", tz) != nil {
			return badParam("tz", "not a time zone such as Europe/Paris")
		}
		loc = l
	}
	for _, name := range []string{"since", "until"} {
		v := q.str(name)
		if v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			continue
		}
		for _, layout := range localLayouts {
			if t, err := time.ParseInLocation(layout, v, loc); err == nil {
				q.vals.Set(name, t.Format(time.RFC3339))
				break
			}
		}
	}
	return nil
}

// filterOf is the body of a bulk action on the jobs f selects.
func filterOf(f queue.Filter) filterBody {
	fb := filterBody{Kinds: f.Kinds, Queue: f.Queue, Run: f.RunID, Period: f.Period, Correlation: f.CorrelationID, Q: f.Search}
	if !f.CreatedAfter.IsZero() {
		fb.Since = &f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		fb.Until = &f.CreatedBefore
	}
	return fb
}

// matchActions are the bulk actions on every job f selects, f read from
// vals: retry, when it may select FAILED jobs; cancel, when it sets a
// field and may select QUEUED or PROCESSING jobs.
func matchActions(f queue.Filter, vals url.Values) (retry, cancel *matchAction) {
	fb := filterOf(f)
	in := func(take ...queue.Status) []queue.Status {
		if len(f.Statuses) == 0 {
			return take
		}
		return slices.DeleteFunc(slices.Clone(take), func(s queue.Status) bool { return !slices.Contains(f.Statuses, s) })
	}
	action := func(ss []queue.Status) *matchAction {
		body := fb
		body.Statuses = ss
		count := url.Values{}
		for _, p := range countParams {
			if v, ok := vals[p.Name]; ok {
				count[p.Name] = v
			}
		}
		count.Del("status")
		for _, s := range ss {
			count.Add("status", string(s))
		}
		return &matchAction{CountURL: "api/jobs/count?" + count.Encode(), Filter: body, Words: filterWords(body)}
	}
	if ss := in(queue.StatusFailed); len(ss) > 0 {
		retry = action(ss)
	}
	if ss := in(queue.StatusQueued, queue.StatusProcessing); len(ss) > 0 && !fb.empty() {
		cancel = action(ss)
	}
	return retry, cancel
}

// filterWords says in words which jobs fb selects: "failed jobs of run
// nightly@1 on queue exports"; "every failed job (no filter is set)".
func filterWords(fb filterBody) string {
	var states []string
	for _, s := range fb.Statuses {
		states = append(states, statusWords[s])
	}
	noun := strings.Join(states, " or ") + " jobs"
	if fb.empty() {
		return "every one of the " + noun + ": no filter is set"
	}
	var parts []string
	if len(fb.Kinds) > 0 {
		parts = append(parts, "of kind "+strings.Join(fb.Kinds, " or "))
	}
	for _, p := range []struct{ words, v string }{{"on queue ", fb.Queue}, {"of run ", fb.Run}, {"of period ", fb.Period},
		{"with correlation ID ", fb.Correlation}} {
		if p.v != "" {
			parts = append(parts, p.words+p.v)
		}
	}
	if fb.Since != nil {
		parts = append(parts, "created from "+fb.Since.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if fb.Until != nil {
		parts = append(parts, "created before "+fb.Until.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if fb.Q != "" {
		parts = append(parts, strconv.Quote(fb.Q)+" in their error or arguments")
	}
	return noun + " " + strings.Join(parts, ", ")
}

// statusWords names the statuses in prose.
var statusWords = map[queue.Status]string{queue.StatusQueued: "queued", queue.StatusProcessing: "running",
	queue.StatusCompleted: "completed", queue.StatusFailed: "failed", queue.StatusCancelled: "cancelled"}

// jobData is one job's page.
type jobData struct {
	jobDetailResponse
	// Final is true once the job is COMPLETED, FAILED or CANCELLED.
	Final bool
	// CanCancel and CanRetry say which buttons to show: those the caller
	// may use, on a job in a status that allows them. CanRunNow shows
	// "Run now" ("Retry now" on a retry) on a job due later.
	CanCancel, CanRetry, CanRunNow bool
	// Wait says why a QUEUED job has not started; nil for other statuses.
	Wait *jobWait
	// NextAttempt is the number of the job's next attempt; RetryLimit the
	// attempt limit a retry gives it, which the page states beforehand.
	NextAttempt, RetryLimit int
	// Rules are the dependency rules the job is a parent in: what it
	// holds up until it completes.
	Rules []string
	// Cancelled is, for a CANCELLED job, the audit log's entry of the
	// request that cancelled it, if the console made it (recently).
	Cancelled *queue.AuditEntry
}

// auditScan is how many of the newest audit entries a cancelled job's
// page looks through for the one that cancelled it.
const auditScan = 200

// cancelledBy finds the audit entry that cancelled job j: one naming it,
// or a bulk cancel by filter made as it was cancelled; nil if none of the
// newest auditScan entries is.
func (c *console) cancelledBy(ctx context.Context, j jobView) (*queue.AuditEntry, error) {
	entries, err := c.client.AuditLog(ctx, 0, auditScan)
	if err != nil {
		return nil, err
	}
	return cancelEntry(entries, j), nil
}

// cancelEntry is the entry of entries, newest first, that cancelled job j:
// one naming it, or a bulk cancel by filter made as it was cancelled.
func cancelEntry(entries []queue.AuditEntry, j jobView) *queue.AuditEntry {
	at := timeOf(j.CompletedAt)
	for _, e := range entries {
		if e.Action != string(ActionCancel) || e.Result != "ok" {
			continue
		}
		var t struct {
			Job    int64           `json:"job"`
			IDs    []int64         `json:"ids"`
			Filter json.RawMessage `json:"filter"`
		}
		if json.Unmarshal(e.Target, &t) != nil {
			continue
		}
		near := e.At.Sub(at).Abs() < 5*time.Second
		if t.Job == j.ID || slices.Contains(t.IDs, j.ID) || (t.Filter != nil && near) {
			return &e
		}
	}
	return nil
}

// jobWait is why a QUEUED job waits.
type jobWait struct {
	// Later is true for a job due later; Retry when that is a retry's
	// backoff, after failed attempts.
	Later, Retry bool
	// Paused is true when its queue is paused.
	Paused bool
	// Window is the batch window that is closed to it, which Opens then;
	// empty when none is.
	Window string
	Opens  time.Time
	// Limits are the limits that hold it back now, as
	// queue.LimitUse.String says them.
	Limits []string
}

func (c *console) jobHTML(r *http.Request, acc Access) (pageBody, error) {
	id, err := pathID(r)
	if err != nil {
		return pageBody{}, err
	}
	d, err := c.jobDetail(r.Context(), id)
	if err != nil {
		return pageBody{}, err
	}
	j := d.Job
	st := j.Status
	jd := jobData{jobDetailResponse: d, Final: st == queue.StatusCompleted || st == queue.StatusFailed || st == queue.StatusCancelled,
		CanCancel: acc.Cancel && (st == queue.StatusQueued || st == queue.StatusProcessing),
		CanRetry:  acc.Retry && (st == queue.StatusFailed || st == queue.StatusCancelled),
		// As a retry sets it: as many attempts again as the job used.
		NextAttempt: j.Attempts + 1, RetryLimit: j.Attempts + j.MaxAttempts}
	if j.Attempts == 0 {
		jd.RetryLimit = j.MaxAttempts
	}
	for _, ru := range c.reg.Rules() {
		if slices.Contains(ru.Parents, j.Kind) {
			jd.Rules = append(jd.Rules, ru.Name)
		}
	}
	if st == queue.StatusCancelled {
		if jd.Cancelled, err = c.cancelledBy(r.Context(), j); err != nil {
			return pageBody{}, err
		}
	}
	if st == queue.StatusQueued {
		if jd.Wait, err = c.jobWaits(r.Context(), j); err != nil {
			return pageBody{}, err
		}
		jd.CanRunNow = acc.Retry && jd.Wait.Later
	}
	live := liveSlow
	if !jd.Final {
		live = liveFast
	}
	return pageBody{Title: "Job " + strconv.FormatInt(id, 10), Data: jd, LiveMS: live}, nil
}

// jobWaits says why QUEUED job j has not started.
func (c *console) jobWaits(ctx context.Context, j jobView) (*jobWait, error) {
	now := time.Now()
	w := &jobWait{Later: j.RunAt.After(now)}
	w.Retry = w.Later && j.Attempts > 0
	qs, _, err := c.queuesCache.get(ctx, c.cfg.countsTTL, c.client.Queues)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if q.Name == j.Queue {
			w.Paused = q.Paused
		}
	}
	if win, ok := c.reg.ClosedWindow(j.Kind, j.Queue, now); ok {
		w.Window, w.Opens = win.String(), win.NextOpen(now)
	}
	if !w.Later {
		if w.Limits, err = c.limitsHolding(ctx, j); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// runsData is the list of runs, and the night it shows.
type runsData struct {
	Period string
	Runs   []runView
	Next   string
}

func (c *console) runsHTML(r *http.Request, _ Access) (pageBody, error) {
	q, _, err := pageQuery(r, runParams)
	if err != nil {
		return pageBody{}, err
	}
	page, err := c.runsPage(r.Context(), q)
	if err != nil {
		return pageBody{}, err
	}
	d := runsData{Period: q.str("period"), Runs: page.Runs}
	if page.NextCursor != "" {
		d.Next = link("runs", "period", d.Period, "cursor", page.NextCursor)
	}
	return pageBody{Title: "Runs", Data: d, LiveMS: liveSlow}, nil
}

// runData is a run's morning review, arranged for reading.
type runData struct {
	reviewView
	Groups  []groupRows
	Waiting []waitingRow
	// Chains are the dependency chains whose child is missing: stopped
	// (a parent failed, was cancelled or is missing) or waiting (every
	// parent that has not completed is still to run).
	Chains []chainRow
	// Stopped counts the chains that stopped, of Chains.
	Stopped int
	// CanRetry shows the buttons that retry the run's failed jobs.
	CanRetry bool
	// Timing is the run's wall time beside its schedule's earlier runs';
	// nil for a run older than the newest nightRuns.
	Timing *nightView
}

// groupRows is a group of failures and (the first of) its jobs.
type groupRows struct {
	failureGroup
	Jobs []jobView
	More int
	// Attempts sums the attempts of the group's jobs the review read, Known
	// of them; First and Last are when the first and the last of those
	// failed. The page states them only when it read every job.
	Attempts, Known int
	First, Last     time.Time
	// Search is the text GET /jobs?q= finds the group's jobs by: the
	// longest literal part of its message.
	Search string
	// Retry is the body of the request that retries the group's jobs
	// (the first maxBulkIDs of them).
	Retry retryRequest
	// Other is the group of the failures past the error groups the review
	// reads: it names no job and no error, so it can only be opened among
	// the run's failed jobs.
	Other bool
}

// otherErrors is the message of a review's last failure group when it
// finds more distinct errors than it reads (see queue.FailureGroup).
const otherErrors = "(other)"

// waitingRow is a job that never ran, and why.
type waitingRow struct {
	Job     jobView
	Reasons []waitReason
}

// chainRow is a dependency chain whose child is missing, and its drawing.
type chainRow struct {
	stoppedView
	Graph template.HTML
	// Waiting is true when no parent failed, was cancelled or is missing:
	// the chain has not stopped, its child is still to come.
	Waiting bool
}

// groupJobs is how many jobs of a failure group the review lists.
const groupJobs = 20

func (c *console) runHTML(r *http.Request, acc Access) (pageBody, error) {
	q, _, err := pageQuery(r, reviewParams)
	if err != nil {
		return pageBody{}, err
	}
	rq, err := reviewQueryOf(r, q)
	if err != nil {
		return pageBody{}, err
	}
	rv, err := c.reviewOf(r.Context(), rq)
	if err != nil {
		return pageBody{}, err
	}
	id := rq.RunID
	d := runData{reviewView: rv, CanRetry: acc.Retry && rv.Counts[queue.StatusFailed] > 0}
	if d.Timing, err = c.runTiming(r.Context(), id); err != nil {
		return pageBody{}, err
	}
	byID := map[int64]jobView{}
	for _, j := range rv.Failed {
		byID[j.ID] = j
	}
	for _, g := range rv.Failures {
		row := groupRows{failureGroup: g, Search: searchOf(g.Message),
			Retry: retryRequest{IDs: g.JobIDs[:min(len(g.JobIDs), maxBulkIDs)]}}
		if g.Message == otherErrors && len(g.JobIDs) == 0 {
			d.Groups = append(d.Groups, groupRows{failureGroup: g, Other: true})
			continue
		}
		for _, jid := range g.JobIDs[:min(len(g.JobIDs), groupJobs)] {
			j, ok := byID[jid]
			if !ok { // past the review's first failed jobs: named by its ID
				row.Jobs = append(row.Jobs, jobView{ID: jid})
				continue
			}
			row.Known++
			row.Attempts += j.Attempts
			if at := timeOf(j.CompletedAt); !at.IsZero() {
				if row.First.IsZero() || at.Before(row.First) {
					row.First = at
				}
				if at.After(row.Last) {
					row.Last = at
				}
			}
			row.Jobs = append(row.Jobs, j)
		}
		row.More = g.Count - len(row.Jobs)
		d.Groups = append(d.Groups, row)
	}
	for i, j := range rv.NeverRan {
		d.Waiting = append(d.Waiting, waitingRow{Job: j, Reasons: rv.Waiting[i].Reasons})
	}
	for _, s := range rv.Stopped {
		var statuses []queue.Status
		for _, b := range s.Blocking {
			statuses = append(statuses, b.Status)
		}
		row := chainRow{stoppedView: s, Graph: chainGraph(s), Waiting: chainWaits(s.MissingKinds, statuses)}
		if !row.Waiting {
			d.Stopped++
		}
		d.Chains = append(d.Chains, row)
	}
	return pageBody{Title: "Run " + id, Data: d, LiveMS: liveSlow}, nil
}

// chainWaits reports whether a dependency chain whose child is missing is
// only waiting: no parent kind is missing, and every parent that has not
// completed (of statuses) is still to run.
func chainWaits(missing []string, statuses []queue.Status) bool {
	if len(missing) > 0 || len(statuses) == 0 {
		return false
	}
	for _, st := range statuses {
		if st != queue.StatusQueued && st != queue.StatusProcessing {
			return false
		}
	}
	return true
}

// placeholders are what errshape puts for the parts of a message that
// vary: <n>, <hex>, <uuid>.
var placeholders = regexp.MustCompile(`<[a-z]+>`)

// searchOf is the longest literal part of a failure group's message,
// between its placeholders: the text that finds its jobs.
func searchOf(shape string) string {
	best := ""
	for _, part := range placeholders.Split(shape, -1) {
		if part = strings.TrimSpace(part); len(part) > len(best) {
			best = part
		}
	}
	return best
}

// schedulesData is the schedules and the batch windows.
type schedulesData struct {
	Schedules []scheduleView
	Windows   []windowRow
	// Latest is the latest run of each schedule by name, for those whose
	// ticks no runner recorded (jobs submitted into a schedule's run).
	Latest map[string]*runView
}

// windowRow is a batch window, open or closed now.
type windowRow struct {
	Queue, Kind, Window string
	Open                bool
	// Opens is when a closed window opens, on its own clock.
	Opens time.Time
}

func (c *console) schedulesHTML(r *http.Request, _ Access) (pageBody, error) {
	vs, err := c.scheduleViews(r.Context())
	if err != nil {
		return pageBody{}, err
	}
	d := schedulesData{Schedules: vs, Latest: map[string]*runView{}}
	latest, err := c.latestRuns(r.Context())
	if err != nil {
		return pageBody{}, err
	}
	for _, n := range latest {
		d.Latest[n.Schedule] = &n.Run
	}
	now := c.client.Clock().Now()
	for _, w := range c.reg.Windows() {
		row := windowRow{Queue: w.Queue, Kind: w.Kind, Window: w.Window.String(), Open: w.Window.Open(now)}
		if !row.Open {
			row.Opens = w.Window.NextOpen(now)
		}
		d.Windows = append(d.Windows, row)
	}
	return pageBody{Title: "Schedules", Data: d, LiveMS: liveSlow}, nil
}

// auditData is a page of the audit log.
type auditData struct {
	Entries []auditView
	Next    string
}

func (c *console) auditHTML(r *http.Request, _ Access) (pageBody, error) {
	q, _, err := pageQuery(r, auditParams)
	if err != nil {
		return pageBody{}, err
	}
	page, err := c.auditPage(r.Context(), q)
	if err != nil {
		return pageBody{}, err
	}
	d := auditData{Entries: page.Entries}
	if page.NextCursor != "" {
		d.Next = link("audit", "cursor", page.NextCursor)
	}
	return pageBody{Title: "Audit log", Data: d, LiveMS: liveSlow}, nil
}

// The overview's two spans of activity: the last hour by the minute, the
// last day by the hour. The day's series is by the hour so that it reads
// the hour roll-ups of the hours that are over, and stays drawn once their
// jobs are pruned; it changes slowly, so it is reused for dayTTLs times as
// long as the counts.
var spans = []struct {
	name, per      string
	length, bucket time.Duration
}{
	{"last hour", "minute", time.Hour, time.Minute},
	{"last day", "hour", 24 * time.Hour, time.Hour},
}

const dayTTLs = 12

// activityCharts draws the activity of the last hour and day: jobs finished
// per bucket, and their wait and run times.
func (c *console) activityCharts(ctx context.Context) ([]template.HTML, error) {
	var out []template.HTML
	for i, span := range spans {
		ttl := c.cfg.countsTTL
		if i > 0 {
			ttl *= dayTTLs
		}
		series, _, err := c.activity[i].get(ctx, ttl, func(ctx context.Context) ([]queue.ActivityBucket, error) {
			return c.client.Activity(ctx, queue.ActivityQuery{Since: time.Now().Add(-span.length), Bucket: span.bucket})
		})
		if err != nil {
			return nil, err
		}
		out = append(out, throughputChart(span.name, span.per, series), latencyChart(span.name, series))
	}
	days, err := c.daysChart(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, days), nil
}

// throughputChart draws the jobs that completed and failed per bucket.
func throughputChart(span, per string, bs []queue.ActivityBucket) template.HTML {
	ch := chart{Title: "Jobs finished per " + per + ", " + span,
		Unit: func(v float64) string { return num(int64(v)) }}
	done, failed := series{Name: "completed", Class: "completed"}, series{Name: "failed", Class: "failed"}
	for _, b := range bs {
		ch.Times = append(ch.Times, b.Start)
		done.Values = append(done.Values, float64(b.Completed))
		failed.Values = append(failed.Values, float64(b.Failed))
	}
	return ch.bars([]series{done, failed})
}

// latencyChart draws the median and 95th percentile of the queue wait and
// the run time per bucket; a bucket without finished jobs has none.
func latencyChart(span string, bs []queue.ActivityBucket) template.HTML {
	ch := chart{Title: "Wait and run time, " + span,
		Unit: func(v float64) string { return dur(time.Duration(v * float64(time.Second))) }}
	ss := []series{{Name: "wait p50", Class: "wait50"}, {Name: "wait p95", Class: "wait95"},
		{Name: "run p50", Class: "run50"}, {Name: "run p95", Class: "run95"}}
	for _, b := range bs {
		ch.Times = append(ch.Times, b.Start)
		vals := []time.Duration{b.WaitP50, b.WaitP95, b.RunP50, b.RunP95}
		for i := range ss {
			v := math.NaN()
			if b.Completed+b.Failed > 0 {
				v = vals[i].Seconds()
			}
			ss[i].Values = append(ss[i].Values, v)
		}
	}
	return ch.lines(ss)
}
