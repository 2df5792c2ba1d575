package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Cluster is a PostgreSQL server of a test's own, for a test that stops or
// restarts its server: the shared server's other tests would fail with it.
// It is one of Debian's clusters (pg_createcluster), on a free port from
// 5400 to 5499, with trust authentication and without fsync, and it is
// dropped when the test ends.
type Cluster struct {
	// DB is a schema on the cluster's postgres database.
	*DB
	version, name string
	// base connects to the cluster's postgres database.
	base string
}

// NewCluster creates and starts a cluster for t. Without Debian's
// postgresql-common tools, or the right to run them, it skips the test, or
// fails it under CI.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	version, err := serverVersion()
	if err == nil {
		_, err = exec.LookPath("pg_createcluster")
	}
	if err == nil && os.Geteuid() != 0 {
		err = fmt.Errorf("pg_createcluster needs root")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("pgtest: cannot create a cluster: %v", err)
		}
		t.Skipf("pgtest: cannot create a cluster (%v); install postgresql-common and run as root", err)
	}
	dropStale.Do(func() { dropStaleClusters(version) })
	// The name says which process made the cluster, for a later run to
	// drop it if that process died before its test could.
	c := &Cluster{version: version, name: fmt.Sprintf("sheaf_%d_%s", os.Getpid(), randomSuffix())}
	port, err := c.create()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	c.base = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	c.DB = newOn(t, c.base)
	return c
}

// NewDB creates another schema on the cluster for t, as New does on the
// shared server: a benchmark compares two states of the queue on one
// server, taking turns.
func (c *Cluster) NewDB(t testing.TB) *DB {
	t.Helper()
	return newOn(t, c.base)
}

// Restart restarts the server in fast mode: it ends every session, rolling
// back its transaction, and accepts connections again once it is up.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if err := c.ctl("restart", "-m", "fast"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// create creates and starts the cluster on the first port that will do,
// and returns it.
func (c *Cluster) create() (int, error) {
	// Tests in this process, and in others, may be creating clusters too:
	// a port that another takes first fails the creation or the start, and
	// the next one is tried.
	first := 5400 + (os.Getpid()+10*int(clusters.Add(1)))%100
	var last error
	for i := range 100 {
		port := 5400 + (first-5400+i)%100
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		out, err := exec.Command("pg_createcluster", c.version, c.name, "--port", strconv.Itoa(port),
			"-o", "fsync=off", "-o", "max_connections=50",
			"--", "--auth-local=trust", "--auth-host=trust", "--no-sync").CombinedOutput()
		if err != nil {
			last = fmt.Errorf("pg_createcluster: %v: %s", err, out)
			continue
		}
		if last = c.ctl("start"); last == nil {
			return port, nil
		}
		if err := c.drop(); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("create a cluster: no port from 5400 to 5499 would do: %v", last)
}

// clusters counts the clusters this process has begun to create, so that
// those it creates at once start looking at different ports.
var clusters atomic.Int32

var dropStale sync.Once

// dropStaleClusters drops the clusters of version that processes which have
// died left behind (a test binary killed at its timeout runs no clean-up).
func dropStaleClusters(version string) {
	out, err := exec.Command("pg_lsclusters", "--no-header").Output()
	if err != nil {
		return
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != version {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(f[1], "sheaf_%d_", &pid); err != nil || pid <= 0 || alive(pid) {
			continue
		}
		_ = (&Cluster{version: version, name: f[1]}).drop()
	}
}

// alive reports whether a process with the given ID exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// drop stops the cluster and removes it.
func (c *Cluster) drop() error {
	if out, err := exec.Command("pg_dropcluster", "--stop", c.version, c.name).CombinedOutput(); err != nil {
		return fmt.Errorf("drop cluster %s: %v: %s", c.name, err, out)
	}
	return nil
}

// ctl runs pg_ctlcluster action on the cluster.
func (c *Cluster) ctl(action string, args ...string) error {
	cmd := exec.Command("pg_ctlcluster", append([]string{"--skip-systemctl-redirect", c.version, c.name, action}, args...)...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s after %v: %v: %s", c.name, action, time.Since(start).Round(time.Millisecond), err, out)
	}
	return nil
}

// serverVersion is the newest PostgreSQL installed, as Debian names it.
func serverVersion() (string, error) {
	dirs, err := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if err != nil || len(dirs) == 0 {
		return "", fmt.Errorf("no PostgreSQL server installed under /usr/lib/postgresql")
	}
	versions := make([]int, 0, len(dirs))
	for _, d := range dirs {
		if v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(d)))); err == nil {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("no PostgreSQL server installed under /usr/lib/postgresql")
	}
	return strconv.Itoa(slices.Max(versions)), nil
}
