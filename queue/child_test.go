package queue_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue"
)

// The multi-process tests run this test binary again as a runner process.
// The child learns what to do from its environment, reports on stdout, and
// stops gracefully when its stdin closes.
const (
	childEnv     = "SHEAF_QUEUE_CHILD" // runner ID
	childDSNEnv  = "SHEAF_QUEUE_CHILD_DSN"
	childLeaseMS = "SHEAF_QUEUE_CHILD_LEASE_MS"
	// childStopMS, if set, makes the child stop with a deadline this many
	// milliseconds away when its stdin closes, report on stdout how long
	// Stop took and how long before its deadline it returned, and exit at
	// once, as a program that stops on SIGTERM does.
	childStopMS = "SHEAF_QUEUE_CHILD_STOP_MS"
	// childPruneEnv, if set to n, makes the child prune instead of run:
	// Client.Prune with an archive that lets n-1 batches through and,
	// at the nth, says "archiving" and blocks, its batch's transaction
	// open, until the parent kills it.
	childPruneEnv = "SHEAF_QUEUE_CHILD_PRUNE"
)

// Payloads the child knows.
type ledgerJob struct{ N int }

func (ledgerJob) Kind() string { return "ledger" }

type hangJob struct{}

func (hangJob) Kind() string { return "hang" }

// stubbornJob, in a child process, announces itself on out and blocks,
// ignoring its cancellation; in the test's own process it records itself
// in the ledger.
type stubbornJob struct{}

func (stubbornJob) Kind() string { return "stubborn" }

type suicideJob struct{}

func (suicideJob) Kind() string { return "suicide" }

// poisonJob ends its process with os.Exit, as a handler that hits a fatal
// bug would; napJob is an ordinary job that takes Ms milliseconds.
type poisonJob struct{}

func (poisonJob) Kind() string { return "poison" }

type napJob struct{ Ms int }

func (napJob) Kind() string { return "nap" }

// txLedgerJob records the job in the ledger and completes it in the same
// transaction (Job.CompleteTx). In a child process it kills its process at
// Crash: "before-commit" (the transaction written, not committed) or
// "after-commit" (committed, the handler not yet returned).
type txLedgerJob struct{ Crash string }

func (txLedgerJob) Kind() string { return "tx_ledger" }

// txChildJob is released by every tx_ledger job that completes (rule
// "tx-child"), in the transaction that completes it.
type txChildJob struct{}

func (txChildJob) Kind() string { return "tx_child" }

// registerLedger registers the kinds the multi-runner tests use. ledger
// records the job in the ledger table inside a transaction; hang, in a child
// process, announces itself on out and blocks, and in the test's own process
// records itself in the ledger; suicide kills its process.
func registerLedger(db *gorm.DB, out io.Writer) func(*queue.Registry) {
	inChild := os.Getenv(childEnv) != ""
	return func(r *queue.Registry) {
		must(queue.Register(r, queue.HandlerFunc[ledgerJob](func(ctx context.Context, j *queue.Job[ledgerJob]) error {
			return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				return tx.Exec("INSERT INTO ledger (job_id, attempt) VALUES (?, ?)", j.ID, j.Attempt).Error
			})
		})))
		must(queue.Register(r, queue.HandlerFunc[hangJob](func(ctx context.Context, j *queue.Job[hangJob]) error {
			fmt.Fprintf(out, "started %d %d\n", j.ID, j.Attempt)
			if !inChild {
				return db.WithContext(ctx).Exec("INSERT INTO ledger (job_id, attempt) VALUES (?, ?)", j.ID, j.Attempt).Error
			}
			<-ctx.Done()
			return ctx.Err()
		})))
		must(queue.Register(r, queue.HandlerFunc[stubbornJob](func(ctx context.Context, j *queue.Job[stubbornJob]) error {
			fmt.Fprintf(out, "started %d %d\n", j.ID, j.Attempt)
			if !inChild {
				return db.WithContext(ctx).Exec("INSERT INTO ledger (job_id, attempt) VALUES (?, ?)", j.ID, j.Attempt).Error
			}
			select {} // until the process exits
		})))
		must(queue.Register(r, queue.HandlerFunc[poisonJob](func(context.Context, *queue.Job[poisonJob]) error {
			os.Exit(3)
			return nil
		})))
		must(queue.Register(r, queue.HandlerFunc[napJob](func(ctx context.Context, j *queue.Job[napJob]) error {
			select {
			case <-time.After(time.Duration(j.Args.Ms) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			return db.WithContext(ctx).Exec("INSERT INTO ledger (job_id, attempt) VALUES (?, ?)", j.ID, j.Attempt).Error
		})))
		must(queue.Register(r, queue.HandlerFunc[txLedgerJob](func(ctx context.Context, j *queue.Job[txLedgerJob]) error {
			die := func(at string) {
				if inChild && j.Args.Crash == at {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {} // never returns
				}
			}
			err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec("INSERT INTO ledger (job_id, attempt) VALUES (?, ?)", j.ID, j.Attempt).Error; err != nil {
					return err
				}
				if err := j.CompleteTx(ctx, tx); err != nil {
					return err
				}
				die("before-commit")
				return nil
			})
			if err == nil {
				die("after-commit")
			}
			return err
		})))
		must(queue.Register(r, queue.HandlerFunc[txChildJob](func(context.Context, *queue.Job[txChildJob]) error { return nil })))
		must(queue.Depend(r, queue.Rule{Name: "tx-child", Parents: []string{"tx_ledger"}, Each: true},
			func([]queue.JobRecord) (txChildJob, []queue.EnqueueOption) { return txChildJob{}, nil }))
		must(queue.Register(r, queue.HandlerFunc[suicideJob](func(context.Context, *queue.Job[suicideJob]) error {
			fmt.Fprintln(out, "dying")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns
		})))
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func runChild() bool {
	id := os.Getenv(childEnv)
	if id == "" {
		return false
	}
	db, err := pgtest.OpenDSN(os.Getenv(childDSNEnv))
	must(err)
	sqlDB, err := db.DB()
	must(err)
	sizePool(sqlDB)
	reg := queue.NewRegistry()
	registerLedger(db, os.Stdout)(reg)
	registerChildLimited(db, reg)
	if stall := os.Getenv(childPruneEnv); stall != "" {
		pruneChild(db, reg, stall)
		return true
	}
	// Warnings go to stderr, which the parent shows if a test fails: a
	// child's view of a failure (a campaign that could not reach the
	// server, say) is then in the output.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := queue.NewClient(db, reg, queue.WithLogger(log.With("child", id)))
	must(err)
	lease := 30 * time.Second
	if ms := os.Getenv(childLeaseMS); ms != "" {
		var n int
		fmt.Sscan(ms, &n)
		lease = time.Duration(n) * time.Millisecond
	}
	var out sync.Mutex // stdout lines must not interleave
	done := queue.ObserverFunc(func(ev queue.Event) {
		if ev.Type == queue.EventCompleted {
			out.Lock()
			fmt.Printf("done %d\n", ev.JobID)
			out.Unlock()
		}
	})
	r, err := queue.NewRunner(c, queue.WithRunnerID(id), queue.WithLease(lease), queue.WithObserver(done), queue.WithWorkers(testWorkers),
		queue.WithRescueInterval(100*time.Millisecond), queue.WithPollInterval(50*time.Millisecond), childMaintenance(db, id))
	must(err)
	must(r.Start(context.Background()))
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin
	if ms := os.Getenv(childStopMS); ms != "" {
		var n int
		fmt.Sscan(ms, &n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*time.Millisecond)
		deadline, _ := ctx.Deadline()
		began := time.Now()
		err := r.Stop(ctx)
		returned := time.Now()
		cancel()
		out.Lock() // held until the exit: no line after this one
		fmt.Printf("stop returned %d %d %v\n", returned.Sub(began).Microseconds(), deadline.Sub(returned).Microseconds(), err)
		testexit.Exit(0)
	}
	must(r.Stop(context.Background()))
	fmt.Println("stopped")
	return true
}

// pruneChild prunes with an archive that blocks at batch stall (see
// childPruneEnv).
func pruneChild(db *gorm.DB, reg *queue.Registry, stall string) {
	var at, batches int
	fmt.Sscan(stall, &at)
	archive := func(_ context.Context, jobs []queue.JobRecord) error {
		if batches++; batches == at {
			fmt.Printf("archiving %d\n", len(jobs))
			select {} // until the parent kills the process
		}
		return nil
	}
	c, err := queue.NewClient(db, reg, queue.WithLogger(slog.New(slog.DiscardHandler)), queue.WithRetention(queue.Retention{Archive: archive, HourlyHistory: dayOfHours}))
	must(err)
	fmt.Println("ready")
	_, err = c.Prune(context.Background())
	must(err)
}

// child is a runner in another process.
type child struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	lines     chan string
	completed atomic.Int64
	exitOnce  sync.Once
	exit      chan struct{}
}

// startChild starts a runner process, with env added to its environment.
// Its completions ("done <id>" lines) are counted and handed to obs as
// EventCompleted events.
func startChild(t *testing.T, dsn, id string, lease time.Duration, obs queue.Observer, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+id, childDSNEnv+"="+dsn, fmt.Sprintf("%s=%d", childLeaseMS, lease.Milliseconds()))
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 100)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			var jobID int64
			if _, err := fmt.Sscanf(line, "done %d", &jobID); err == nil {
				c.completed.Add(1)
				if obs != nil {
					obs.Observe(queue.Event{Type: queue.EventCompleted, JobID: jobID})
				}
				continue
			}
			c.lines <- line
		}
	}()
	c.expect(t, "ready")
	return c
}

// expect waits for a line starting with prefix and returns it.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before saying %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("child did not say %q", prefix)
		}
	}
}

// stop closes the child's stdin and waits for it to stop gracefully.
func (c *child) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, c.stdin.Close())
	c.expect(t, "stopped")
	require.NoError(t, c.cmd.Wait())
}

// exited is closed when the child's process has ended (its stdout closed).
func (c *child) exited() <-chan struct{} {
	c.exitOnce.Do(func() {
		c.exit = make(chan struct{})
		go func() {
			for range c.lines { // drain what it said last
			}
			_ = c.cmd.Wait()
			close(c.exit)
		}()
	})
	return c.exit
}

// kill kills the child with SIGKILL and waits for it to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	_ = c.cmd.Wait()
}
