package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/mysqldb"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// Exit codes; doc.go lists them for users.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitSchema   = 3
	dbEnv        = "SHEAF_DATABASE_URL"
	consoleToken = "SHEAF_CONSOLE_TOKEN"
)

// errUsage marks an error in how the command was called.
var errUsage = errors.New("usage")

// usageError is an error in how the command was called.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// env is what every command runs with: its output and the environment.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one of sheaf's commands.
type command struct {
	name, summary string
	run           func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"migrate", "create or upgrade the queue's tables; print their SQL; show the schema version", runMigrate},
		{"jobs", "list, show, retry and cancel jobs", runJobs},
		{"queues", "list, pause and resume queues", runQueues},
		{"review", "the morning review of a run, a night or a time range, as text or JSON", runReview},
		{"serve", "serve the console (API and dashboard) on an address", runServe},
		{"bench", "measure how fast the queue enqueues and works jobs", runBench},
	}
}

func main() { os.Exit(sheafMain()) }

// sheafMain runs the command that os.Args names until it ends, or an interrupt
// or SIGTERM stops it, and returns the exit code.
func sheafMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
}

// run runs the command in args and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		e.usage(e.stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return e.exit(c.run(ctx, e, args[1:]))
		}
	}
	fmt.Fprintf(e.stderr, "sheaf: unknown command %q\n\n", args[0])
	e.usage(e.stderr)
	return exitUsage
}

func (e *env) usage(w io.Writer) {
	fmt.Fprint(w, "sheaf operates a sheaf job queue on PostgreSQL, MariaDB or SQLite.\n\nUsage: sheaf <command> [arguments]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nEvery command takes -db URL (default $%s): postgres://user@host/db?search_path=schema,\nmysql://user:password@host:3306/db or sqlite:path/to/file.db. Run sheaf <command> -h for a command's flags.\n", dbEnv)
	fmt.Fprint(w, "\nExit codes: 0 done; 1 failed (database, job not found, wrong status); 2 bad usage;\n3 the schema is not at this sheaf's version (run sheaf migrate).\n")
}

// exit prints err, if any, and returns its exit code.
func (e *env) exit(err error) int {
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage), errors.Is(err, queue.ErrInvalidOption):
		fmt.Fprintf(e.stderr, "sheaf: %v\n", err)
		return exitUsage
	case errors.Is(err, queue.ErrNotMigrated), errors.Is(err, queue.ErrSchemaTooNew), errors.Is(err, queue.ErrPartialSchema), errors.Is(err, errSchemaBehind):
		fmt.Fprintf(e.stderr, "sheaf: %v\n", err)
		return exitSchema
	}
	fmt.Fprintf(e.stderr, "sheaf: %v\n", err)
	return exitFailed
}

// flags returns a flag set for a command, with -db, that prints its usage
// to the command's output and returns errors rather than exiting.
func (e *env) flags(name, args, about string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("sheaf "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	db := fs.String("db", e.getenv(dbEnv), "database URL: postgres://…, mysql://… or sqlite:path (default $"+dbEnv+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sheaf %s %s\n\n%s\n\nFlags:\n", name, args, about)
		fs.PrintDefaults()
	}
	return fs, db
}

// parse parses args into fs, flags before and after the positional
// arguments alike, which it returns: -h prints the usage to stdout and
// ends the command with exit code 0; a bad flag is a usage error.
func (e *env) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return nil, err
		}
		if err != nil {
			return nil, usageError("%v (sheaf %s -h for help)", err, strings.TrimPrefix(fs.Name(), "sheaf "))
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional, args = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
}

// parseNone parses args into fs, and refuses positional arguments.
func (e *env) parseNone(fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args)
	if err == nil && len(pos) > 0 {
		err = usageError("%s: unexpected arguments %q", strings.TrimPrefix(fs.Name(), "sheaf "), pos)
	}
	return err
}

// open connects to the database at dsn and returns a client for it, with
// reg or an empty registry: the commands read and operate jobs without
// running their handlers. create allows a new SQLite file. close closes
// the connections.
func (e *env) open(ctx context.Context, dsn string, create bool, reg *queue.Registry) (client *queue.Client, db *gorm.DB, close func(), err error) {
	db, err = openDB(dsn, create)
	if err != nil {
		return nil, nil, nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, nil, err
	}
	close = func() { _ = sqlDB.Close() }
	if err := sqlDB.PingContext(ctx); err != nil {
		close()
		return nil, nil, nil, fmt.Errorf("connect to %s: %w", redact(dsn), err)
	}
	if reg == nil {
		reg = queue.NewRegistry()
	}
	// The queue's log says what goes wrong, not what goes well.
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err = queue.NewClient(db, reg, queue.WithLogger(log))
	if err != nil {
		close()
		return nil, nil, nil, err
	}
	return client, db, close, nil
}

// openDB opens gorm on a postgres://, mysql:// or sqlite: URL; create
// allows a new SQLite file.
func openDB(dsn string, create bool) (*gorm.DB, error) {
	if dsn == "" {
		return nil, usageError("no database: give -db URL or set $%s", dbEnv)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, usageError("database URL: %v", err)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", redact(dsn), err)
		}
		return db, nil
	case "sqlite":
		path := u.Opaque
		if path == "" {
			path = u.Path
		}
		if path == "" {
			return nil, usageError("database URL %q names no file: sqlite:path/to/file.db", dsn)
		}
		if _, err := os.Stat(path); err != nil && !create {
			// Opening would create it: a typo would look like an empty queue.
			return nil, fmt.Errorf("sqlite database %s: %w", path, err)
		}
		return sqlitedb.Open(path, &gorm.Config{Logger: logger.Discard})
	case "mysql":
		if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return nil, usageError("database URL %q names no server or database: mysql://user:password@host:3306/database", redact(dsn))
		}
		db, err := mysqldb.Open(dsn, &gorm.Config{Logger: logger.Discard})
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", redact(dsn), err)
		}
		return db, nil
	}
	return nil, usageError("database URL %q: want postgres://…, mysql://… or sqlite:path", redact(dsn))
}

// redact hides a URL's password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "the database URL"
	}
	return u.Redacted()
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// sortedStatuses returns the statuses of counts in lifecycle order.
func sortedStatuses(counts map[queue.Status]int64) []queue.Status {
	var out []queue.Status
	for _, s := range queue.Statuses() {
		if counts[s] > 0 {
			out = append(out, s)
		}
	}
	return out
}
