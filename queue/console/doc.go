// Package console serves an operations API for a queue over HTTP: jobs
// listed (newest first), searched, inspected with their attempts,
// submitted, cancelled and retried, one by one or in bulk; queues paused
// and resumed; runners seen lately; runs and their morning reviews;
// schedules and their next ticks; counts and health; and the audit log of
// all the changes made through it. It speaks JSON under /api/, and
// describes itself at /api/openapi.json. Under / it serves the same as a
// dashboard for people (see Dashboard).
//
// New returns an http.Handler that starts no goroutines and can be mounted
// under any prefix with http.StripPrefix:
//
//	h, err := console.New(client, console.WithAuthorizer(authorize))
//	mux.Handle("/ops/", http.StripPrefix("/ops", h))
//
// # Access
//
// Every request goes through the authorizer (WithAuthorizer), which says
// what its caller may read and do. Without one, the console is read-only:
// every request that would change something is refused with 403.
// Requests that change state are also refused when a browser sends them
// from another origin (http.CrossOriginProtection), and their JSON bodies
// are limited to 1 MiB and may hold no field the endpoint does not know.
//
// # Audit
//
// Every request that would change state and passes the checks above is
// recorded in the queue's audit log (queue.Client.RecordAudit), whether
// it succeeds or is answered with an error: who (Access.Actor, else the
// request's remote address), the action (submit, cancel, retry, pause,
// resume), its target as JSON ({"job":…}, {"ids":[…]}, {"filter":{…}},
// {"queue":…}), its result ("ok", or the error's code) and how many jobs
// changed. Requests refused with 401 or 403 made no attempt, and are not
// recorded. When the log cannot take an entry, the console logs the
// failure (WithLogger) and answers the request as it went. GET /api/audit
// reads the log, newest first.
//
// # Large tables
//
// The reads stay quick on a table of millions of jobs: a page of jobs of a
// status (FAILED or CANCELLED: others are found by walking back from the
// newest) comes from an index; a page of a search (q) examines only the
// SearchWindow jobs below its cursor, and may come back short, or empty,
// with a next_cursor to older jobs; GET /api/stats and GET /api/queues,
// which count every job, reuse their counts for a few seconds
// (WithCountsCache), and say when they were read (as_of).
//
// # Dashboard
//
// GET / is an overview (jobs by queue and status, queues with their
// oldest due job and a pause button, the last hour's and day's activity
// as charts, the runners); /jobs lists jobs by the API's filters, with
// bulk retry and cancel of a selection or of every job that matches;
// /jobs/{id} is one job with its attempts and progress; /runs and
// /runs/{id} are the runs of a night and a run's morning review;
// /schedules shows the schedules and batch windows; /audit the audit log.
// The pages are rendered on the server from templates embedded in the
// package, with one stylesheet and one small script and nothing loaded
// from elsewhere. The script shows times in the viewer's zone, refreshes
// the live parts of a page while its tab is shown, and sends every action
// to the API, through the same authorizer, origin check and audit log; a
// caller who may not act sees no action buttons.
//
// # Errors
//
// Errors are JSON, {"error":{"code":"…","message":"…"}}, with the HTTP
// status that fits: the queue's typed errors map to codes such as
// unknown_kind and invalid_payload (422), invalid_option (400), not_found
// (404) and wrong_status (409). A query parameter that cannot be read is
// invalid_param (400), and the error names it in "param".
package console
