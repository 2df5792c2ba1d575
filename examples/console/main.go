// Command console serves sheaf's operations API over HTTP (queue/console)
// for a queue of county reports, and runs a runner that works the queue.
// With -demo it fills the queue with a night's worth of jobs first:
// completed, failed, retrying and cancelled reports, chunked exports with
// their progress, summaries that the reports' completion released, and a
// nightly schedule.
//
//	go run ./examples/console -demo [-addr 127.0.0.1:8080] [-dsn URL] [-read-only]
//
// Without -dsn or DATABASE_URL, it works in a new SQLite file in a
// temporary folder, which it removes at the end; with a postgres:// URL, in
// a schema of its own, sheaf_example_console, which it drops and recreates
// at start. Either way it migrates the new database.
//
// It is a local demo: without -read-only it lets every caller on the
// loopback interface do everything (submit, cancel, retry, pause), and
// says so as it starts; with -read-only it gives no authorizer, and the
// console refuses every change with 403. Ctrl-C stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sheaf-dev/sheaf/examples/internal/exampledb"
	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

const schema = "sheaf_example_console"

// stopGrace is how long the runner's jobs have to finish once the program
// is asked to stop; those that have not are put back in the queue.
// Shorter than the time an orchestrator waits before it kills the process
// (Kubernetes: 30 s after SIGTERM, by default).
const stopGrace = 10 * time.Second

// options are the program's flags.
type options struct {
	addr, dsn      string
	demo, readOnly bool
	// smoke starts the server, checks /api/health over HTTP, and returns.
	smoke bool
	// ready, if set, is told the address the server listens on.
	ready func(addr string)
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to serve the dashboard and the API on")
	flag.StringVar(&o.dsn, "dsn", "", "PostgreSQL URL (default $DATABASE_URL, else an SQLite file in a new temporary folder)")
	flag.BoolVar(&o.demo, "demo", false, "fill the queue with a night's worth of jobs first")
	flag.BoolVar(&o.readOnly, "read-only", false, "refuse every change with 403 (no authorizer)")
	flag.BoolVar(&o.smoke, "smoke", false, "start, check GET /api/health, and exit")
	flag.Parse()
	if o.dsn == "" {
		o.dsn = os.Getenv("DATABASE_URL")
	}
	// Ctrl-C or SIGTERM ends the program: the runner stops (see run).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		log.Fatal("console: ", err)
	}
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	// The runner's four connections, its four workers', the console's.
	edb, err := exampledb.Open(ctx, schema, o.dsn, 4+workers+2)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, edb.Close()) }()
	reg, err := registry()
	if err != nil {
		return err
	}
	// The console and the demo say what happens; the queue's log only
	// speaks up about real trouble.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	client, err := queue.NewClient(edb.DB, reg, queue.WithLogger(quiet))
	if err != nil {
		return err
	}
	if err := client.Migrate(ctx); err != nil {
		return err
	}
	if o.demo {
		n, err := fill(ctx, client)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "demo: %d jobs of last night in %s\n", n, edb.Where)
	}

	runner, err := queue.NewRunner(client, queue.WithWorkers(workers), queue.WithQueues(queue.DefaultQueue, exportQueue),
		queue.WithPollInterval(200*time.Millisecond))
	if err != nil {
		return err
	}
	// Started on a context the signal does not cancel, which would cut the
	// running jobs short at once: when ctx ends, Stop gives them a grace
	// period, then puts back in the queue those that have not finished, and
	// the program may exit as soon as it returns.
	if err := runner.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), stopGrace)
		defer cancel()
		err = errors.Join(err, runner.Stop(stop))
	}()
	if o.demo {
		if err := backdate(ctx, client, edb.DB); err != nil {
			return err
		}
		fmt.Fprintf(out, "demo: the two nights have run, and are moved back to %s and %s, 23:00 UTC\n",
			lastNight().Add(-24*time.Hour).Format(time.DateOnly), lastNight().Format(time.DateOnly))
	}

	opts := []console.Option{console.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))}
	if !o.readOnly {
		opts = append(opts, console.WithAuthorizer(loopbackOnly))
	}
	api, err := console.New(client, opts...)
	if err != nil {
		return err
	}
	return serve(ctx, o, api, out)
}

// loopbackOnly lets callers on the loopback interface do everything, and
// others read: this is a demo on one's own machine. A real deployment
// asks its identity provider.
func loopbackOnly(r *http.Request) (console.Access, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !ip.IsLoopback() {
		return console.Access{Read: true}, nil
	}
	return console.Access{Read: true, Submit: true, Cancel: true, Retry: true, Pause: true, Actor: "local " + host}, nil
}

// serve serves api until ctx is done (or, with o.smoke, until the health
// check has answered), then shuts the server down.
func serve(ctx context.Context, o options, api http.Handler, out io.Writer) error {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if o.readOnly {
		fmt.Fprintf(out, "console: serving the dashboard at http://%s/ and the API under /api/, read-only: "+
			"every change is refused with 403\n", addr)
	} else {
		fmt.Fprintf(out, "console: serving the dashboard at http://%s/ and the API under /api/, as a local demo: "+
			"callers on loopback may do everything "+
			"(submit, cancel, retry, pause); -read-only refuses changes\n", addr)
	}
	if o.ready != nil {
		o.ready(addr)
	}
	if o.smoke {
		err = checkHealth(ctx, "http://"+addr+"/api/health")
		if err == nil {
			fmt.Fprintln(out, "console: GET /api/health answered ok")
		}
	} else {
		select {
		case <-ctx.Done():
		case err = <-served:
			return err
		}
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(shut))
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// checkHealth asks the health endpoint, which must answer 200.
func checkHealth(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	c := &http.Client{}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/health: %s: %s", res.Status, body)
	}
	return nil
}
