// Command sheaf operates a sheaf job queue (package queue) on PostgreSQL,
// MariaDB or SQLite from the shell: its schema, its jobs and queues, the morning
// review, the console, and a benchmark.
//
//	go install github.com/sheaf-dev/sheaf/queue/cmd/sheaf@latest
//
// Every command takes -db URL, by default $SHEAF_DATABASE_URL:
// postgres://user:password@host:5432/db?sslmode=disable (a search_path
// parameter picks the schema the queue lives in),
// mysql://user:password@host:3306/db (MariaDB, as package queue/mysqldb
// opens it), or sqlite:path/to/jobs.db
// (an SQLite file, as package queue/sqlitedb opens it; only migrate and
// bench create a new one, so a mistyped path is an error). sheaf -h lists
// the commands, and sheaf <command> -h the flags of each; flags may come
// before or after a command's arguments.
//
//	sheaf migrate [up]                 create or upgrade the tables (idempotent)
//	sheaf migrate sql [-from N]        print the migrations' SQL, for goose, atlas, ...
//	sheaf migrate status               print the schema's version and this sheaf's
//	sheaf jobs list [filters] [-json]  jobs newest first: -status, -kind, -queue, -run,
//	                                   -period, -correlation, -since, -until, -q, -before, -limit
//	sheaf jobs get ID [-json]          one job, with its attempts and its chunks' times
//	sheaf jobs retry|cancel ID...      retry or cancel jobs
//	sheaf queues [list] [-json]        queues, their jobs by status, paused or not
//	sheaf queues pause|resume NAME     pause or resume a queue in every runner
//	sheaf review -run ID|-period DATE|-from T [-to T] [-json]
//	                                   the morning review, as text or JSON
//	sheaf serve [-addr host:port]      the console: API under /api/, dashboard under /
//	sheaf bench [-jobs N] [-workers N] bulk insert and work no-op jobs, with both rates
//
// The commands know no job kinds and run no handlers: they read and change
// the jobs' rows through package queue, as the console does: jobs get
// shows a chunked job's chunks and their times, not its chunk size, which
// only the program that registers the kind knows. Retries,
// cancellations, pauses and resumes are recorded in the queue's audit log
// (queue.Client.AuditLog) with the actor "sheaf-cli:" and the operating
// system's user name. No command prints a job's claims (queue.Auth).
//
// serve is read-only unless $SHEAF_CONSOLE_TOKEN is set; then a request with
// "Authorization: Bearer <token>" may also submit, cancel, retry, pause and
// silence, recorded as "token". It stops, letting requests finish, on
// SIGINT or SIGTERM.
//
// bench puts its jobs in the queue sheaf_bench of the database it is given,
// where they stay COMPLETED until retention prunes them: give it a scratch
// database or schema.
//
// # Exit codes
//
//	0  done
//	1  failed: the database could not be reached or refused, a job was not
//	   found or not in a status that allows the change
//	2  bad usage: an unknown command or flag, a missing or malformed
//	   argument, a value the queue refuses (queue.ErrInvalidOption), no
//	   database URL
//	3  the schema is not at this sheaf's version: not migrated, older (run
//	   sheaf migrate) or newer than this sheaf (upgrade it); migrate status
//	   exits with 3 when the versions differ
package main
