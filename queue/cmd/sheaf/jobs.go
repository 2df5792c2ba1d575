package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/internal/jobview"
)

func runJobs(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprint(e.stdout, jobsUsage)
			return nil
		}
		return usageError("jobs: want a subcommand: list, get, retry or cancel")
	}
	switch sub, args := args[0], args[1:]; sub {
	case "list":
		return jobsList(ctx, e, args)
	case "get":
		return jobsGet(ctx, e, args)
	case "retry", "cancel":
		return jobsChange(ctx, e, sub, args)
	default:
		return usageError("jobs: unknown subcommand %q (list, get, retry, cancel)", sub)
	}
}

const jobsUsage = `Usage: sheaf jobs list|get|retry|cancel [flags] [IDs]

  list            jobs newest first, with the console's filters (sheaf jobs list -h)
  get ID          one job, with its attempts
  retry ID...     put FAILED or CANCELLED jobs back in their queues
  cancel ID...    cancel QUEUED or PROCESSING jobs
`

func isHelp(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

func jobsList(ctx context.Context, e *env, args []string) error {
	fs, dsn := e.flags("jobs list", "[flags]", "Lists jobs newest first, with the console's filters.")
	status := fs.String("status", "", "statuses, comma-separated: QUEUED,PROCESSING,COMPLETED,FAILED,CANCELLED")
	kind := fs.String("kind", "", "kinds, comma-separated")
	queueName := fs.String("queue", "", "queue")
	run := fs.String("run", "", "schedule run ID")
	period := fs.String("period", "", "period (a night's date, 2006-01-02)")
	correlation := fs.String("correlation", "", "correlation ID")
	since := fs.String("since", "", "created after this time (RFC 3339) or this long ago (24h)")
	until := fs.String("until", "", "created before this time (RFC 3339) or this long ago")
	search := fs.String("q", "", "text in the last error or the arguments")
	before := fs.Int64("before", 0, "only jobs with smaller IDs (the next page)")
	limit := fs.Int("limit", 50, "at most this many jobs (1 to 10000)")
	asJSON := fs.Bool("json", false, "print JSON, one job a line")
	if err := e.parseNone(fs, args); err != nil {
		return err
	}
	f := queue.Filter{Kinds: splitList(*kind), Queue: *queueName, RunID: *run, Period: *period,
		CorrelationID: *correlation, Search: *search, BeforeID: *before, Newest: true, Limit: *limit}
	for _, s := range splitList(*status) {
		st := queue.Status(strings.ToUpper(s))
		if !validStatus(st) {
			return usageError("jobs list: -status %q: want QUEUED, PROCESSING, COMPLETED, FAILED or CANCELLED", s)
		}
		f.Statuses = append(f.Statuses, st)
	}
	var err error
	if f.CreatedAfter, err = when("since", *since); err != nil {
		return err
	}
	if f.CreatedBefore, err = when("until", *until); err != nil {
		return err
	}
	client, _, closeDB, err := e.open(ctx, *dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	recs, err := client.List(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for i := range recs {
			if err := enc.Encode(jobview.Of(&recs[i], recs[i].Payload)); err != nil {
				return err
			}
		}
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tKIND\tQUEUE\tSTATUS\tPRIORITY\tATTEMPTS\tCREATED\tLAST ERROR")
	for _, r := range recs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", r.ID, r.Kind, r.Queue, r.Status, r.Priority,
			r.Attempts, r.MaxAttempts, r.CreatedAt.Local().Format(time.DateTime), oneLine(deref(r.LastError), 60))
	}
	return w.Flush()
}

func validStatus(s queue.Status) bool {
	for _, v := range queue.Statuses() {
		if v == s {
			return true
		}
	}
	return false
}

// when parses a time flag: RFC 3339, or a duration ago.
func when(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError("-%s %q: want a time (2006-01-02T15:04:05Z) or a duration (24h)", name, v)
	}
	return t, nil
}

func jobsGet(ctx context.Context, e *env, args []string) error {
	fs, dsn := e.flags("jobs get", "ID [flags]", "Shows one job, with its output, its last attempts and, for a chunked job, how long its chunks took. Its claims (auth) are never shown.")
	asJSON := fs.Bool("json", false, "print JSON")
	ids, err := e.parseIDs(fs, args)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usageError("jobs get: want one job ID")
	}
	client, _, closeDB, err := e.open(ctx, *dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	r, err := client.Get(ctx, ids[0])
	if err != nil {
		return err
	}
	attempts, err := client.Attempts(ctx, r.ID)
	if err != nil {
		return err
	}
	// Any job may have chunk times: whether its kind is chunked is known
	// only to the program that registered it.
	chunks, err := client.ChunkTimes(ctx, r.ID)
	if err != nil {
		return err
	}
	if *asJSON {
		v := detail{Job: jobview.Of(r, r.Payload), Attempts: jobview.Attempts(attempts)}
		v.Progress.SetChunkTimes(chunks)
		if len(r.Output) > 0 {
			v.Output = r.Output
		}
		return json.NewEncoder(e.stdout).Encode(v)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(w, "%s\t%v\n", k, v) }
	row("ID", r.ID)
	row("Kind", r.Kind)
	row("Queue", r.Queue)
	row("Status", r.Status)
	row("Priority", r.Priority)
	row("Attempts", fmt.Sprintf("%d of %d", r.Attempts, r.MaxAttempts))
	row("Args", string(r.Payload))
	row("Created", r.CreatedAt.Local().Format(time.RFC3339))
	row("Run at", r.RunAt.Local().Format(time.RFC3339))
	if r.StartedAt != nil {
		row("Started", r.StartedAt.Local().Format(time.RFC3339))
	}
	if r.CompletedAt != nil {
		row("Completed", r.CompletedAt.Local().Format(time.RFC3339))
	}
	if r.Total != nil {
		row("Progress", fmt.Sprintf("%d of %d", r.Processed, *r.Total))
	}
	if chunks.Count > 0 {
		row("Chunks", fmt.Sprintf("%d done in the latest attempt, %s on average, fastest %s, slowest %s",
			chunks.Count, chunkTime(chunks.Mean()), chunkTime(chunks.Min), chunkTime(chunks.Max)))
		recent := make([]string, len(chunks.Recent))
		for i, d := range chunks.Recent {
			recent[i] = chunkTime(d).String()
		}
		first := chunks.Count - int64(len(recent)) + 1
		row("Chunk times", fmt.Sprintf("chunks %d to %d, oldest first: %s", first, chunks.Count, strings.Join(recent, " ")))
	}
	for k, p := range map[string]*string{"Correlation": r.CorrelationID, "Idempotency key": r.IdempotencyKey, "Run": r.RunID, "Period": r.Period, "Last error": r.LastError} {
		if p != nil {
			row(k, *p)
		}
	}
	if len(r.Output) > 0 {
		row("Output", string(r.Output))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(attempts) > 0 {
		fmt.Fprintln(e.stdout, "\nAttempts:")
		w = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		for _, a := range attempts {
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\n", a.Number, a.Runner, a.StartedAt.Local().Format(time.DateTime), a.Outcome, oneLine(a.Error, 80))
		}
		return w.Flush()
	}
	return nil
}

// jobsChange retries or cancels jobs, and records each in the audit log as
// the console does, with the operating system's user as the actor.
func jobsChange(ctx context.Context, e *env, sub string, args []string) error {
	about := map[string]string{
		"retry":  "Puts FAILED or CANCELLED jobs back in their queues, with their attempts reset.",
		"cancel": "Cancels QUEUED or PROCESSING jobs; a running job's handler is told to stop.",
	}[sub]
	fs, dsn := e.flags("jobs "+sub, "ID... [flags]", about+" Each change is recorded in the audit log.")
	ids, err := e.parseIDs(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usageError("jobs %s: want job IDs", sub)
	}
	client, _, closeDB, err := e.open(ctx, *dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	do := client.Retry
	if sub == "cancel" {
		do = client.Cancel
	}
	failed := 0
	for _, id := range ids {
		r, err := do(ctx, id)
		result, changed := "ok", int64(1)
		if err != nil {
			result, changed = err.Error(), 0
			failed++
			fmt.Fprintf(e.stderr, "sheaf: job %d: %v\n", id, err)
		} else {
			fmt.Fprintf(e.stdout, "job %d: %s\n", id, r.Status)
		}
		target, _ := json.Marshal(map[string]int64{"job": id})
		if _, err := client.RecordAudit(ctx, auditEntry(sub, target, result, changed)); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d jobs could not be %s", failed, len(ids), map[string]string{"retry": "retried", "cancel": "cancelled"}[sub])
	}
	return nil
}

// auditEntry is a change the command made, for the audit log, with the
// operating system's user as the actor.
func auditEntry(action string, target json.RawMessage, result string, changed int64) queue.AuditEntry {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return queue.AuditEntry{Actor: "sheaf-cli:" + name, Action: action, Target: target, Result: result, Changed: changed}
}

// parseIDs parses args into fs, and the positional arguments as job IDs.
func (e *env) parseIDs(fs *flag.FlagSet, args []string) ([]int64, error) {
	pos, err := e.parse(fs, args)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(pos))
	for _, a := range pos {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usageError("%q is not a job ID", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// detail is a job as jobs get prints it: as the console's API shows it,
// with its attempts.
type detail struct {
	jobview.Job
	Attempts []jobview.Attempt `json:"attempt_log,omitempty"`
}

// chunkTime rounds a chunk's time to what is worth reading: tenths of a
// millisecond below 10ms, milliseconds above.
func chunkTime(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// stored shows a job's arguments as they are stored.
func stored(_ string, payload json.RawMessage) json.RawMessage { return payload }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
