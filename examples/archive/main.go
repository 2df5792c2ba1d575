// Command archive shows the queue's retention: finished jobs are archived to
// gzipped JSON-lines files, one file per batch, then deleted, while their
// day roll-ups keep the history.
//
// It works a night of county reports (two of which fail for good), then
// moves the finished jobs forty days into the past, as if a month had gone
// by (a demonstration cannot wait a month), and prunes: Client.Prune rolls
// the days up and deletes what the retention no longer keeps, each batch
// written to a file first. It reads the files back and prints the history
// that outlives the jobs.
//
//	go run ./examples/archive [-dsn URL] [-out DIR]
//
// Without -dsn or DATABASE_URL, it works in a new SQLite file in a
// temporary folder, which it removes at the end. With a postgres:// URL, it
// works in a schema of its own, sheaf_example_archive, which it drops and
// recreates at start. It exits non-zero if the archive does not hold every
// deleted job.
package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

const schema = "sheaf_example_archive"

var counties = []string{"Bexar", "Dallas", "Harris", "Tarrant", "Travis", "Collin", "Denton", "Hidalgo"}

// report is the job: a county's report, which fails for good for the
// counties whose feed is down.
type report struct {
	County string `json:"county"`
	Down   bool   `json:"down,omitempty"`
}

func (report) Kind() string { return "county_report" }

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a new temporary folder)")
	out := flag.String("out", "", "folder for the archive files (default a new temporary folder, removed at the end)")
	flag.Parse()
	if *dsn == "" {
		*dsn = os.Getenv("DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dsn, *out); err != nil {
		log.Fatal("archive: ", err)
	}
}

func run(ctx context.Context, dsn, out string) (err error) {
	if out == "" {
		if out, err = os.MkdirTemp("", "sheaf-archive-"); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(out)) }()
	}
	db, err := exampledb.Open(ctx, schema, dsn, 8)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()

	reg := queue.NewRegistry()
	if err := queue.Register(reg, queue.HandlerFunc[report](func(_ context.Context, j *queue.Job[report]) error {
		if j.Args.Down {
			return queue.Permanent(fmt.Errorf("county %s: feed offline", j.Args.County))
		}
		return nil
	})); err != nil {
		return err
	}
	arch := &archive{dir: out}
	client, err := queue.NewClient(db.DB, reg, queue.WithLogger(slog.New(slog.DiscardHandler)),
		queue.WithRetention(queue.Retention{Archive: arch.write})) // the default durations: 7 days, failures 30
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}
	ids, err := night(ctx, client)
	if err != nil {
		return err
	}
	fmt.Printf("a night of %d county reports ran in %s\n", len(ids), db.Where)

	if err := backdate(ctx, db.DB, 40*24*time.Hour); err != nil {
		return err
	}
	fmt.Println("forty days later:")
	deleted, err := client.Prune(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  pruned %d jobs, archived first to %d file(s)\n", deleted, len(arch.files))
	n, err := arch.count()
	if err != nil {
		return err
	}
	left, err := client.Count(ctx, queue.Filter{})
	if err != nil {
		return err
	}
	fmt.Printf("  the archive holds %d jobs; %d stay in the queue\n", n, left)
	if n != deleted || left != 0 || deleted != int64(len(ids)) {
		return fmt.Errorf("archived %d, deleted %d, left %d of %d", n, deleted, left, len(ids))
	}
	days, err := client.History(ctx, queue.HistoryQuery{From: time.Now().AddDate(0, 0, -41), To: time.Now().AddDate(0, 0, -39)})
	if err != nil {
		return err
	}
	for _, d := range days {
		fmt.Printf("  history of %s, %s: %d completed, %d failed %v\n", d.Day.Format(time.DateOnly), d.Kind, d.Completed, d.Failed, d.Errors)
	}
	if len(days) == 0 {
		return errors.New("no history kept")
	}
	return nil
}

// night enqueues a report per county, two of them on feeds that are down,
// and works them until every one has finished.
func night(ctx context.Context, client *queue.Client) ([]int64, error) {
	var ids []int64
	for i, c := range counties {
		res, err := client.Enqueue(ctx, report{County: c, Down: i%4 == 3})
		if err != nil {
			return nil, err
		}
		ids = append(ids, res.Job.ID)
	}
	r, err := queue.NewRunner(client, queue.WithWorkers(4), queue.WithPollInterval(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = client.Wait(wait, ids...)
	return ids, errors.Join(err, r.Stop(ctx))
}

// backdate moves every finished job's times by ago into the past: what a
// month of waiting would do.
func backdate(ctx context.Context, db *gorm.DB, ago time.Duration) error {
	var jobs []struct {
		ID                   int64
		StartedAt, Completed time.Time
	}
	if err := db.WithContext(ctx).Raw("SELECT id, started_at, completed_at AS completed FROM sheaf_jobs").Scan(&jobs).Error; err != nil {
		return err
	}
	at := func(t time.Time) any { return t.Add(-ago) }
	if db.Dialector.Name() == "sqlite" {
		at = func(t time.Time) any { return t.Add(-ago).UTC().Format(sqlitedb.TimeLayout) }
	}
	for _, j := range jobs {
		if err := db.WithContext(ctx).Exec("UPDATE sheaf_jobs SET created_at = ?, run_at = ?, started_at = ?, completed_at = ? WHERE id = ?",
			at(j.StartedAt), at(j.StartedAt), at(j.StartedAt), at(j.Completed), j.ID).Error; err != nil {
			return err
		}
	}
	return nil
}

// archive writes each batch of jobs the retention deletes to a gzipped
// JSON-lines file of its own, synced to disk before the batch's
// transaction deletes the jobs: if writing fails, the batch stays in the
// queue, and the next pass offers it again.
type archive struct {
	dir   string
	files []string
}

func (a *archive) write(_ context.Context, jobs []queue.JobRecord) (err error) {
	name := filepath.Join(a.dir, fmt.Sprintf("jobs-%d-%d.jsonl.gz", jobs[0].ID, jobs[len(jobs)-1].ID))
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close(), os.Remove(tmp))
		}
	}()
	zw := gzip.NewWriter(f)
	enc := json.NewEncoder(zw)
	for _, j := range jobs {
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	a.files = append(a.files, name)
	return nil
}

// count reads the archive back and counts its jobs.
func (a *archive) count() (int64, error) {
	var n int64
	for _, name := range a.files {
		f, err := os.Open(name)
		if err != nil {
			return n, err
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			return n, errors.Join(err, f.Close())
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var j queue.JobRecord
			if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
				return n, errors.Join(err, f.Close())
			}
			n++
		}
		if err := errors.Join(sc.Err(), f.Close()); err != nil {
			return n, err
		}
	}
	return n, nil
}
