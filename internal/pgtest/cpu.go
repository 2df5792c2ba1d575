package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// CPU is CPU time (user and system) spent over a measured span: by this
// process, and by the database server's backends that served the schema.
type CPU struct {
	Process time.Duration
	// Server is the backends' CPU time; zero when it cannot be read (SQLite,
	// a server on another machine, or a /proc that hides other users'
	// processes), as Known says.
	Server time.Duration
	Known  bool
}

// PerJob reports c as the benchmark metrics cpu-us/job (this process) and,
// when known, server-cpu-us/job, for n jobs: the figures that judge a change
// on a machine whose speed drifts, as CPU time drifts far less than
// throughput does.
func (c CPU) PerJob(b interface{ ReportMetric(float64, string) }, n int) {
	b.ReportMetric(float64(c.Process.Microseconds())/float64(n), "cpu-us/job")
	if c.Known {
		b.ReportMetric(float64(c.Server.Microseconds())/float64(n), "server-cpu-us/job")
	}
}

// CPUMeter measures this process's CPU time (getrusage) and that of the
// server backends serving db's schema from StartCPU until Stop. The backends
// are those whose application_name is the schema's name, as every
// connection opened with db's DSN is labelled; they are found in
// pg_stat_activity and read from /proc/<pid>/stat, so the server must run on
// this machine. A backend that exits while the meter runs keeps the CPU time
// of its last sample: the meter samples every 500 ms, seldom enough that
// its own queries cost next to nothing.
type CPUMeter struct {
	db       *DB
	rusage   time.Duration
	mu       sync.Mutex
	first    map[int]time.Duration // a backend's CPU time when first seen; zero if born after the start
	last     map[int]time.Duration
	known    bool
	stop     chan struct{}
	stopped  chan struct{}
	tickSecs float64
}

// StartCPU starts a meter on db.
func StartCPU(db *DB) *CPUMeter {
	m := &CPUMeter{db: db, first: map[int]time.Duration{}, last: map[int]time.Duration{},
		stop: make(chan struct{}), stopped: make(chan struct{}), tickSecs: 1.0 / 100}
	m.known = !db.isSQLite() && m.sample(true) == nil
	m.rusage = processCPU()
	go m.loop()
	return m
}

// Stop ends the measurement and returns what was spent since StartCPU.
func (m *CPUMeter) Stop() CPU {
	proc := processCPU() - m.rusage
	close(m.stop)
	<-m.stopped
	if m.known && m.sample(false) != nil {
		m.known = false
	}
	c := CPU{Process: proc, Known: m.known}
	if c.Known {
		for pid, t := range m.last {
			c.Server += t - m.first[pid]
		}
	}
	return c
}

func (m *CPUMeter) loop() {
	defer close(m.stopped)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
			if m.known {
				_ = m.sample(false) // a failed sample loses nothing but precision; Stop's decides
			}
		}
	}
}

// sample reads every backend of the schema; at the start, their CPU times
// so far are what later samples are measured from.
func (m *CPUMeter) sample(start bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := m.db.SQL.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, m.db.Schema)
	if err != nil {
		return err
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return err
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pid := range pids {
		t, err := procCPU(pid, m.tickSecs)
		if err != nil {
			if os.IsNotExist(err) {
				continue // exited since the query
			}
			return err
		}
		if start {
			m.first[pid] = t
		}
		m.last[pid] = t
	}
	return nil
}

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads utime and stime of process pid from /proc, in clock ticks
// of tick seconds (USER_HZ, 100 on Linux).
func procCPU(pid int, tick float64) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := statTicks(raw)
	if err != nil {
		return 0, fmt.Errorf("pgtest: /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(float64(ticks) * tick * float64(time.Second)), nil
}

// statTicks sums utime and stime, fields 14 and 15 of a /proc/<pid>/stat.
func statTicks(raw []byte) (uint64, error) {
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses; the fields after the last ')' start with field 3.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := bytes.Fields(raw[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return ticks, nil
}
