package alert_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/internal/pgtest"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
)

// childDSNEnv, if set, makes this test binary an alerter process on that
// database whose sink says "sending <event ID>" and blocks, until the
// parent kills it.
const childDSNEnv = "SHEAF_ALERT_CHILD_DSN"

// stuckSink announces a send and never returns.
type stuckSink struct{}

func (stuckSink) Send(_ context.Context, n alert.Notice) error {
	fmt.Printf("sending %s\n", n.EventID)
	select {} // until the process is killed
}

// sendingChild runs the alerter process if this is one, and reports
// whether it was.
func sendingChild() bool {
	dsn := os.Getenv(childDSNEnv)
	if dsn == "" {
		return false
	}
	db, err := pgtest.OpenDSN(dsn)
	if err == nil {
		var c *queue.Client
		if c, err = queue.NewClient(db, queue.NewRegistry(), queue.WithLogger(quiet())); err == nil {
			var a *alert.Alerter
			if a, err = alert.New(c, alert.WithRules(alert.Dead()), alert.WithLogger(quiet()), alert.WithSink("test", stuckSink{})); err == nil {
				_, err = a.Run(context.Background())
			}
		}
	}
	fmt.Println("error", err)
	return true
}

// An alerter process killed with SIGKILL while it sends a notice: the
// notice is neither lost nor recorded sent; the next alerter sends it
// again, under the same event ID, records it sent, and sends it no more.
func TestAlerterKilledMidSendSendsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	began := time.Now() // the child's clock is the machine's
	id := e.enqueue(t)
	e.fail(t, id, "boom")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDSNEnv+"="+e.db.DSN)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	var event string
	for event == "" && lines.Scan() {
		line := lines.Text()
		require.False(t, strings.HasPrefix(line, "error"), line)
		event, _ = strings.CutPrefix(line, "sending ")
	}
	require.NotEmpty(t, event, "the child sends the notice")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	a := e.alerter(t, alert.WithRules(alert.Dead()))
	eps := episodes(t, a)
	require.Len(t, eps, 1, "the episode was recorded before the send")
	// The dead process's attempt counted: its retry is due a backoff
	// after the moment it claimed the notice, by its own clock.
	e.clock.add(time.Since(began) + alert.DefaultRetryBackoff + time.Second)
	run(t, a)
	got := e.sink.notices()
	require.Len(t, got, 1)
	require.Equal(t, event, got[0].EventID, "the same notice, under the same event ID")
	require.Equal(t, fmt.Sprintf("job %d", id), got[0].Key)
	e.clock.add(time.Hour)
	run(t, a)
	require.Len(t, e.sink.notices(), 1, "once recorded sent, not sent again")
}
