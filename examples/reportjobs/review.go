package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
)

// console prints lines from the runner's goroutines and the watcher, one at
// a time, each with the time since the start.
type console struct {
	mu    sync.Mutex
	start time.Time
}

func (c *console) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.start = time.Now()
}

func (c *console) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Printf("%6.2fs  %s\n", time.Since(c.start).Seconds(), line)
}

func (c *console) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.start)
}

// event prints what the runner reports about a job.
func (c *console) event(ev queue.Event, jobs map[int64]submission) {
	s := jobs[ev.JobID]
	name := fmt.Sprintf("job %d %-8s", ev.JobID, slug(s.County))
	switch ev.Type {
	case queue.EventStarted:
		c.printf("%s started (priority %d, attempt %d of %d)", name, s.priority, ev.Attempt, ev.MaxAttempts)
	case queue.EventRetrying:
		c.printf("%s attempt %d failed: %v; retry in %v", name, ev.Attempt, ev.Err, ev.RetryIn)
	case queue.EventCompleted:
		c.printf("%s completed in %v", name, ev.Duration.Round(time.Millisecond))
	case queue.EventCancelled:
		c.printf("%s stopped by the cancel after %v", name, ev.Duration.Round(time.Millisecond))
	case queue.EventFailed:
		c.printf("%s failed for good: %v", name, ev.Err)
	default:
		c.printf("%s %v", name, ev.Type)
	}
}

// written says that a job has written records records so far.
type written struct {
	job     int64
	records int64
}

// watch prints the jobs' progress as it changes, looking every 100ms, until
// every job has finished. When the handler reports on halfway that the job
// to cancel is half written, it cancels that job, as an operator watching
// the progress would.
func watch(ctx context.Context, client *queue.Client, con *console, out string, jobs map[int64]submission, halfway <-chan written) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	var last string
	for {
		recs, err := client.List(ctx, queue.Filter{Kinds: []string{CountyReport{}.Kind()}})
		if err != nil {
			return err
		}
		done := true
		cells := make([]string, 0, len(recs))
		for _, r := range recs {
			cells = append(cells, slug(jobs[r.ID].County)+" "+progress(r))
			done = done && r.Status.Terminal()
		}
		if line := strings.Join(cells, "  "); line != last {
			con.printf("progress  %s", line)
			last = line
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-deadline:
			return errors.New("jobs still running after 2 minutes")
		case w := <-halfway:
			if err := cancelJob(ctx, client, con, w, jobs[w.job], out); err != nil {
				return err
			}
		case <-tick.C:
		}
	}
}

// cancelJob cancels a running job, saying how much it had written.
func cancelJob(ctx context.Context, client *queue.Client, con *console, w written, s submission, out string) error {
	partial := partialPath(out, s.CountyReport)
	held := "nothing"
	if info, err := os.Stat(partial); err == nil {
		held = size(info.Size())
	}
	con.printf("job %d %-8s cancelling: %s of %s records written, %s holds %s",
		w.job, slug(s.County), thousands(w.records), thousands(int64(s.entries)), filepath.Base(partial), held)
	_, err := client.Cancel(ctx, w.job)
	if errors.Is(err, queue.ErrWrongStatus) {
		return nil // it finished meanwhile; checkOutput reports it
	}
	return err
}

// progress is a job's state in a word, or how far it has got.
func progress(r queue.JobRecord) string {
	switch r.Status {
	case queue.StatusQueued:
		if r.Attempts > 0 {
			return "retry"
		}
		return "queued"
	case queue.StatusProcessing:
		if r.Total == nil || *r.Total == 0 {
			return "0%"
		}
		return fmt.Sprintf("%d%%", 100*r.Processed / *r.Total)
	case queue.StatusCompleted:
		return "done"
	}
	return strings.ToLower(string(r.Status))
}

// printTable prints the morning review: one row per job.
func printTable(recs []queue.JobRecord, jobs map[int64]submission) error {
	clock := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format("15:04:05.000")
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tTYPE\tPRIORITY\tSTATUS\tATTEMPTS\tSTARTED\tCOMPLETED\tDURATION\tRECORDS")
	for _, r := range recs {
		s := jobs[r.ID]
		total := int64(0)
		if r.Total != nil {
			total = *r.Total
		}
		fmt.Fprintf(w, "%d %s\t%s (%s)\t%d\t%s\t%d\t%s\t%s\t%v\t%s/%s\n",
			r.ID, s.County, r.Kind, s.Format, r.Priority, r.Status, r.Attempts,
			clock(r.StartedAt), clock(r.CompletedAt), r.Duration().Round(time.Millisecond),
			thousands(r.Processed), thousands(total))
	}
	return w.Flush()
}

// checkOutput lists the report files and checks that the run went as
// planned: every report complete and readable, the cancelled job's output
// gone, the flaky job through on its second attempt.
func checkOutput(recs []queue.JobRecord, jobs map[int64]submission, out string, cancelID, flakyID int64) error {
	var problems []string
	for _, r := range recs {
		s := jobs[r.ID]
		path := reportPath(out, s.CountyReport)
		want, attempts := queue.StatusCompleted, 1
		switch r.ID {
		case cancelID:
			want = queue.StatusCancelled
		case flakyID:
			attempts = 2
		}
		if r.Status != want || r.Attempts != attempts {
			problems = append(problems, fmt.Sprintf("job %d (%s) is %s after %d attempts; expected %s after %d",
				r.ID, s.County, r.Status, r.Attempts, want, attempts))
		}
		if _, err := os.Stat(partialPath(out, s.CountyReport)); err == nil {
			problems = append(problems, fmt.Sprintf("job %d (%s) left a partial file", r.ID, s.County))
		}
		if r.Status != queue.StatusCompleted {
			if _, err := os.Stat(path); err == nil {
				problems = append(problems, fmt.Sprintf("job %d (%s) is %s but left %s", r.ID, s.County, r.Status, path))
				continue
			}
			fmt.Printf("  %-13s no file: the job is %s, and Cleanup removed its partial output\n", filepath.Base(path), r.Status)
			continue
		}
		n, bytes, err := countRecords(path, s.Format, s.role)
		if err != nil {
			problems = append(problems, fmt.Sprintf("job %d (%s): %v", r.ID, s.County, err))
			continue
		}
		fmt.Printf("  %-13s %7s records  %7s\n", filepath.Base(path), thousands(int64(n)), size(bytes))
		if r.Total == nil || int64(n) != *r.Total {
			problems = append(problems, fmt.Sprintf("job %d (%s): %s has %d records, the job counted %v", r.ID, s.County, path, n, r.Total))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the run did not go as planned:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// countRecords parses a finished report and counts its records, checking
// that each shows what role may see of its SSN.
func countRecords(path, format, role string) (records int, bytes int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	ssns, err := formats[format].read(f, info.Size())
	if err != nil {
		return 0, 0, fmt.Errorf("%s does not parse: %w", path, err)
	}
	for i, ssn := range ssns {
		if !seenBy[role].MatchString(ssn) {
			return 0, 0, fmt.Errorf("%s: record %d shows SSN %q to a %s", path, i+1, ssn, role)
		}
	}
	return len(ssns), info.Size(), nil
}

// seenBy is what each role may see of an SSN.
var seenBy = map[string]*regexp.Regexp{
	roleAdmin:      regexp.MustCompile(`^\d{3}-\d{2}-\d{4}$`),
	roleSupervisor: regexp.MustCompile(`^\*\*\*-\*\*-\d{4}$`),
	roleCaseWorker: regexp.MustCompile(`^` + hiddenSSN + `$`),
}

// thousands prints n with thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
