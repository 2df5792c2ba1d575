package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
)

// CountyReport is the payload of a report job: one county's timesheet
// entries, written as a CSV, JSON, Excel or PDF file. The job's Auth says
// who asked for it, and so what the report shows (see mask.go).
type CountyReport struct {
	County string `json:"county"`
	Format string `json:"format"` // "csv", "json", "xlsx" or "pdf"
}

// Kind names the job type in the queue.
func (CountyReport) Kind() string { return "county_report" }

// Entry is one timesheet entry: a row of the source table and a record of a
// report.
type Entry struct {
	ID       int64   `json:"id"`
	Employee int     `json:"employee"`
	Day      string  `json:"day"`
	Hours    float64 `json:"hours"`
	Project  string  `json:"project"`
	SSN      string  `json:"ssn"` // the employee's, masked by the requester's role
}

// reports is the chunked handler of county_report jobs. The first chunk of
// an attempt opens <out>/<county>.<format>.partial, each chunk appends its
// entries, masked for the requester, and Finish completes the file and
// renames it into place, so a report file either is complete or does not
// exist. An attempt's chunks run in order in one process, so the open file
// is kept between them.
type reports struct {
	db        *gorm.DB
	out       string
	chunkSize int
	// renderCost stands in for the work a real report does per chunk
	// (formatting, masking, lookups), so that progress is slow enough to
	// watch and a job can be cancelled mid-way.
	renderCost time.Duration
	// flaky names the county whose record source drops its connection
	// while reading the third chunk, on the job's first attempt only: the
	// transient failure that the retry gets past.
	flaky string
	say   func(format string, args ...any)
	// wrote, if set, is told after each chunk how many records the job has
	// written so far.
	wrote func(job *queue.Job[CountyReport], records int64)

	mu   sync.Mutex
	open map[int64]reportFile // by job, while an attempt writes it
}

var errConnReset = errors.New("connection reset by peer (simulated)")

// Records counts the county's entries and reads them page by page, one page
// per chunk.
func (h *reports) Records(ctx context.Context, job *queue.Job[CountyReport]) (int64, iter.Seq2[Entry, error], error) {
	if _, ok := formats[job.Args.Format]; !ok {
		// No attempt can fix a bad payload: fail now, without retries.
		return 0, nil, queue.Permanent(fmt.Errorf("unknown report format %q", job.Args.Format))
	}
	if _, err := maskFor(job.Auth, job.Args.County); err != nil {
		return 0, nil, queue.Permanent(err) // no retry grants access
	}
	var total int64
	err := h.db.WithContext(ctx).Raw("SELECT count(*) FROM timesheet_entries WHERE county = ?", job.Args.County).Scan(&total).Error
	if err != nil {
		return 0, nil, err
	}
	fetch := func(ctx context.Context, offset, limit int) ([]Entry, error) {
		if job.Args.County == h.flaky && job.Attempt == 1 && offset == 2*limit {
			return nil, fmt.Errorf("read entries %d to %d: %w", offset+1, offset+limit, errConnReset)
		}
		var page []Entry
		err := h.db.WithContext(ctx).Raw(`
			SELECT id, employee, work_date AS day, hours, project, ssn
			FROM timesheet_entries WHERE county = ? ORDER BY id LIMIT ? OFFSET ?`,
			job.Args.County, limit, offset).Scan(&page).Error
		return page, err
	}
	return total, queue.Pages(ctx, h.chunkSize, fetch), nil
}

// ProcessChunk appends one chunk to the partial file, masked for the
// requester. The first chunk starts the file afresh, so nothing an earlier
// attempt left can leak in.
func (h *reports) ProcessChunk(ctx context.Context, job *queue.Job[CountyReport], chunk batch.Batch[Entry]) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(h.renderCost):
	}
	mask, err := maskFor(job.Auth, job.Args.County)
	if err != nil {
		return queue.Permanent(err)
	}
	file, err := h.file(job, chunk.Seq == 1)
	if err != nil {
		return err
	}
	records := make([]Entry, len(chunk.Items))
	for i, e := range chunk.Items {
		records[i] = mask(e)
	}
	if err := file.write(records); err != nil {
		return err
	}
	if h.wrote != nil {
		h.wrote(job, chunk.Offset+int64(len(chunk.Items)))
	}
	return nil
}

// file returns the job's open report file; first opens it afresh.
func (h *reports) file(job *queue.Job[CountyReport], first bool) (reportFile, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.open[job.ID]; f != nil && !first {
		return f, nil
	}
	if !first {
		return nil, fmt.Errorf("job %d: no open report for a chunk after the first", job.ID)
	}
	if old := h.open[job.ID]; old != nil {
		_ = old.close()
	}
	f, err := formats[job.Args.Format].create(h.partial(job), job.Args.County)
	if err != nil {
		return nil, err
	}
	if h.open == nil {
		h.open = map[int64]reportFile{}
	}
	h.open[job.ID] = f
	return f, nil
}

// take removes the job's open report file from the handler and returns it,
// or nil.
func (h *reports) take(job *queue.Job[CountyReport]) reportFile {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.open[job.ID]
	delete(h.open, job.ID)
	return f
}

// Finish completes the report, makes it durable and renames it into place:
// readers see the whole report or none.
func (h *reports) Finish(ctx context.Context, job *queue.Job[CountyReport]) error {
	f := h.take(job)
	if f == nil { // a county with no entries: no chunk opened the file
		var err error
		if f, err = formats[job.Args.Format].create(h.partial(job), job.Args.County); err != nil {
			return err
		}
	}
	if err := f.finish(); err != nil {
		return err
	}
	return os.Rename(h.partial(job), h.final(job))
}

// Cleanup removes whatever the job wrote: the partial file of a failed or
// cancelled attempt, or the finished file of an attempt that died before
// its completion was recorded. It runs before every retry as well, so it
// must not mind finding nothing.
func (h *reports) Cleanup(ctx context.Context, job *queue.Job[CountyReport]) error {
	var err error
	if f := h.take(job); f != nil {
		err = f.close()
	}
	for _, path := range []string{h.partial(job), h.final(job)} {
		info, statErr := os.Stat(path)
		if errors.Is(statErr, os.ErrNotExist) {
			continue
		}
		if statErr == nil {
			statErr = os.Remove(path)
		}
		if statErr != nil {
			return errors.Join(err, statErr)
		}
		h.say("job %d %-8s cleanup removed %s (%s)", job.ID, slug(job.Args.County), filepath.Base(path), size(info.Size()))
	}
	return err
}

func (h *reports) final(job *queue.Job[CountyReport]) string { return reportPath(h.out, job.Args) }

func (h *reports) partial(job *queue.Job[CountyReport]) string { return partialPath(h.out, job.Args) }

// reportPath is where a report is once finished; partialPath is where it is
// written until then.
func reportPath(dir string, r CountyReport) string {
	return filepath.Join(dir, slug(r.County)+"."+r.Format)
}

func partialPath(dir string, r CountyReport) string { return reportPath(dir, r) + ".partial" }

func slug(county string) string { return strings.ReplaceAll(strings.ToLower(county), " ", "-") }

// columns are a report's columns, in order.
var columns = []string{"id", "employee", "day", "hours", "project", "ssn"}

// cells returns e's cells, as text, in the order of columns.
func (e Entry) cells() []string {
	return []string{strconv.FormatInt(e.ID, 10), strconv.Itoa(e.Employee), e.Day,
		strconv.FormatFloat(e.Hours, 'f', 2, 64), e.Project, e.SSN}
}

// format is a kind of report file: how to create one for writing, and how
// to read a finished one back.
type format struct {
	// create starts a report file at path, for county's entries.
	create func(path, county string) (reportFile, error)
	// read parses a finished report and returns its records' SSNs, as the
	// file shows them, one per record.
	read func(f *os.File, size int64) (ssns []string, err error)
}

// A reportFile is a report being written by one attempt, chunk by chunk.
type reportFile interface {
	// write appends records.
	write(records []Entry) error
	// finish completes the file and closes it.
	finish() error
	// close closes it unfinished, for Cleanup to remove.
	close() error
}

var formats = map[string]format{
	"csv":  {create: createCSV, read: readCSV},
	"json": {create: createJSON, read: readJSON},
	"xlsx": {create: createXLSX, read: readXLSX},
	"pdf":  {create: createPDF, read: readPDF},
}

// size prints a byte count for people.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
