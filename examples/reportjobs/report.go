package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/batch"
	"github.com/sheaf-dev/sheaf/queue"
)

// CountyReport is the payload of a report job: one county's timesheet
// entries, written as a CSV or JSON file.
type CountyReport struct {
	County string `json:"county"`
	Format string `json:"format"` // "csv" or "json"
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
}

// reports is the chunked handler of county_report jobs. Each chunk appends
// its entries to <out>/<county>.<format>.partial; Finish closes the file's
// syntax and renames it into place, so a report file either is complete or
// does not exist.
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
}

var errConnReset = errors.New("connection reset by peer (simulated)")

// Records counts the county's entries and reads them page by page, one page
// per chunk.
func (h *reports) Records(ctx context.Context, job *queue.Job[CountyReport]) (int64, iter.Seq2[Entry, error], error) {
	if _, ok := formats[job.Args.Format]; !ok {
		// No attempt can fix a bad payload: fail now, without retries.
		return 0, nil, queue.Permanent(fmt.Errorf("unknown report format %q", job.Args.Format))
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
			SELECT id, employee, work_date AS day, hours, project
			FROM timesheet_entries WHERE county = ? ORDER BY id LIMIT ? OFFSET ?`,
			job.Args.County, limit, offset).Scan(&page).Error
		return page, err
	}
	return total, queue.Pages(ctx, h.chunkSize, fetch), nil
}

// ProcessChunk appends one chunk to the partial file. The first chunk
// starts the file afresh, so nothing an earlier attempt left can leak in.
func (h *reports) ProcessChunk(ctx context.Context, job *queue.Job[CountyReport], chunk batch.Batch[Entry]) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(h.renderCost):
	}
	f := formats[job.Args.Format]
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if chunk.Seq == 1 {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	file, err := os.OpenFile(h.partial(job), flags, 0o644)
	if err != nil {
		return err
	}
	if chunk.Seq == 1 {
		_, err = io.WriteString(file, f.header)
	}
	if err == nil {
		err = f.write(file, chunk.Items, chunk.Offset == 0)
	}
	if err = errors.Join(err, file.Close()); err != nil {
		return err
	}
	if h.wrote != nil {
		h.wrote(job, chunk.Offset+int64(len(chunk.Items)))
	}
	return nil
}

// Finish closes the report's syntax, makes it durable and renames it into
// place: readers see the whole report or none.
func (h *reports) Finish(ctx context.Context, job *queue.Job[CountyReport]) error {
	f := formats[job.Args.Format]
	file, err := os.OpenFile(h.partial(job), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if info, statErr := file.Stat(); statErr == nil && info.Size() == 0 {
		_, err = io.WriteString(file, f.header) // a county with no entries: no chunk started the file
	}
	if err == nil {
		_, err = io.WriteString(file, f.footer)
	}
	if err == nil {
		err = file.Sync()
	}
	if err = errors.Join(err, file.Close()); err != nil {
		return err
	}
	return os.Rename(h.partial(job), h.final(job))
}

// Cleanup removes whatever the job wrote: the partial file of a failed or
// cancelled attempt, or the finished file of an attempt that died before
// its completion was recorded. It runs before every retry as well, so it
// must not mind finding nothing.
func (h *reports) Cleanup(ctx context.Context, job *queue.Job[CountyReport]) error {
	for _, path := range []string{h.partial(job), h.final(job)} {
		info, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.Remove(path)
		}
		if err != nil {
			return err
		}
		h.say("job %d %-8s cleanup removed %s (%s)", job.ID, slug(job.Args.County), filepath.Base(path), size(info.Size()))
	}
	return nil
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

// format is how a report file is laid out: a header, the records written
// chunk by chunk, a footer.
type format struct {
	header, footer string
	// write appends records; first says whether records[0] is the
	// report's first record.
	write func(w io.Writer, records []Entry, first bool) error
	// count reads a finished report back and counts its records.
	count func(r io.Reader) (int, error)
}

var formats = map[string]format{
	"csv": {
		header: "id,employee,day,hours,project\n",
		write: func(w io.Writer, records []Entry, _ bool) error {
			cw := csv.NewWriter(w)
			for _, e := range records {
				_ = cw.Write([]string{strconv.FormatInt(e.ID, 10), strconv.Itoa(e.Employee), e.Day,
					strconv.FormatFloat(e.Hours, 'f', 2, 64), e.Project})
			}
			cw.Flush()
			return cw.Error()
		},
		count: func(r io.Reader) (int, error) {
			rows, err := csv.NewReader(r).ReadAll()
			return len(rows) - 1, err // less the header
		},
	},
	"json": {
		header: "[\n",
		footer: "\n]\n",
		write: func(w io.Writer, records []Entry, first bool) error {
			var buf []byte
			for i, e := range records {
				if i > 0 || !first {
					buf = append(buf, ",\n"...)
				}
				b, err := json.Marshal(e)
				if err != nil {
					return err
				}
				buf = append(append(buf, "  "...), b...)
			}
			_, err := w.Write(buf)
			return err
		},
		count: func(r io.Reader) (int, error) {
			var all []json.RawMessage
			err := json.NewDecoder(r).Decode(&all)
			return len(all), err
		},
	},
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
