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
//	h, err := console.New(client,
//		console.WithAuthorizer(authorize),       // who may do what; without it, read-only
//		console.WithSubmitter(claimsOf),         // the caller's claims become submitted jobs' queue.Auth
//		console.WithArgsFormatter(redact),       // what operators see of jobs' arguments
//		console.WithTrustedOrigins("https://ops.example.com"))
//	mux.Handle("/ops/", http.StripPrefix("/ops", h))
//
// The program in examples/console serves the API and the dashboard over a
// demo night of jobs, with a runner, on SQLite by default; its README has a
// curl for every endpoint and a picture of every page.
//
// # Endpoints
//
//   - GET /api/jobs: jobs newest first, a page at a time (keyset cursor);
//     filters status, kind, queue, run, period, correlation, since, until,
//     and q, text in the last error or the arguments.
//   - POST /api/jobs: submit a job (201; 200 with the existing job for a
//     taken idempotency key).
//   - GET /api/jobs/{id}: one job, its output, the jobs it released, its
//     last 20 attempts (runner, start, end, outcome, error); for a job due
//     later that a schedule's tick made, due_on_schedule: when on that
//     schedule's clock ("tomorrow 23:00 Asia/Kolkata").
//   - POST /api/jobs/{id}/cancel, /retry: cancel or retry one job (409
//     wrong_status when it cannot be). A cancel may give a reason,
//     {"reason":"…"}, of at most MaxReason characters (400
//     reason_too_long, ErrReasonTooLong, past that).
//   - POST /api/jobs/{id}/run: make a QUEUED job due later (a retry's
//     backoff, a job submitted for later) due now; it needs the retry leave
//     and is audited as run_now.
//   - POST /api/jobs/cancel, /retry: in bulk, {"ids":[…]}, or
//     {"filter":{…}} for every matching job (QUEUED and PROCESSING ones to
//     cancel, FAILED ones to retry); a cancel takes a reason beside them.
//   - GET /api/queues: each queue's jobs by status, its oldest due job's
//     wait, whether it is paused.
//   - POST /api/queues/{name}/pause, /resume: pause a queue in every
//     runner, or resume it.
//   - GET /api/runs, /api/runs/{id}/review: schedule runs, and the morning
//     review of one, with why each job that never ran waits.
//   - GET /api/schedules, /api/kinds, /api/stats: schedules in their own
//     zones with their last tick (or, before the first, since when they
//     wait), the ticks they missed and their next ticks; the kinds; counts.
//   - GET /api/runners?within=1m: the runners seen lately.
//   - GET /api/health: database ping, schema version, runners seen in the
//     last minute; 503 when the database does not answer.
//   - GET /api/audit: the audit log, newest first.
//   - GET /api/alerts, /api/alerts/silences; POST /api/alerts/silences,
//     /api/alerts/silences/{id}/delete: with WithAlerts, the alert
//     episodes (firing, resolved, muted) and silences of a queue/alert
//     Alerter; silence a rule for minutes or until a time, or remove a
//     silence (ActionSilence).
//   - GET /api/openapi.json: the OpenAPI 3 document, built from the same
//     route table as the server, so the two agree. A client generated from
//     it with oapi-codegen builds and calls the API (a test does so).
//
// # Access
//
// Every request goes through the authorizer (WithAuthorizer), a
// func(*http.Request) (Access, error) that says what its caller may do
// (read, submit, cancel, retry, pause, silence) and names the actor. Without one,
// the console is read-only: every request that would change something is
// refused with 403, and New says so once in its log. Requests that change
// state are also refused when a browser sends them from another origin
// (http.CrossOriginProtection; WithTrustedOrigins lets some in), and their
// JSON bodies are limited to 1 MiB and may hold no field the endpoint does
// not know. The submitter's claims (WithSubmitter) are stored with the jobs
// a caller submits, and never shown; the arguments formatter
// (WithArgsFormatter) rewrites what every response shows of a job's
// arguments, while the q search still reads them as stored.
//
// # Audit
//
// Every request that would change state and passes the checks above is
// recorded in the queue's audit log (queue.Client.RecordAudit), whether
// it succeeds or is answered with an error: who (Access.Actor, else the
// request's remote address without its port), the action (submit, cancel,
// retry, run_now, pause, resume, silence, unsilence), its target as JSON ({"job":…}, {"ids":[…]}, {"filter":{…}},
// {"queue":…}; a cancel's reason beside it, {"job":…,"reason":"…"}), its
// result ("ok", or the error's code) and how many jobs changed. Requests refused with 401 or 403 made no attempt, and are not
// recorded. When the log cannot take an entry, the console logs the
// failure (WithLogger) and answers the request as it went. GET /api/audit
// reads the log, newest first, with each entry's reason as a field of its
// own.
//
// # Large tables
//
// The reads stay quick on a table of millions of jobs (examples/BENCHMARKS.md
// has the times): a page of jobs of a status (FAILED or CANCELLED: others
// are found by walking back from the newest) comes from an index; a page of
// a search (q) examines only the SearchWindow jobs below its cursor, and may
// come back short, or empty, with a next_cursor to older jobs; GET
// /api/stats and GET /api/queues, which count the waiting and running jobs
// and read the finished ones' counts from the day roll-ups, reuse their
// counts for a few seconds (WithCountsCache), and say when they were read
// (as_of).
//
// The dashboard's overview reuses what it reads in the same way, however
// many dashboards are open: the last hour's activity as long as the counts,
// the last day's twelve times as long (a minute, by default).
//
// # Dashboard
//
// The same handler serves a dashboard for people under /: the API's data as
// HTML pages, for the operator who opens a browser in the morning to see
// what ran overnight, what failed and why, what is slow, what never ran,
// and to fix it with a click.
//
//   - / (overview): first how last night went: the latest run of each
//     schedule (runs are named schedule@tick), its counts, failure groups,
//     slow jobs, missed ticks, stopped chains and jobs not started, each
//     linked to its review, beside the run before it; when it finished and
//     how long it took ("finished 01:12, took 2 h 10 min"), beside the run
//     before and the median of its schedule's earlier runs; then jobs by queue
//     and status, each count a link to those
//     jobs; each queue's oldest due job and a pause/resume button; jobs
//     finished per minute over the last hour and per hour over the last
//     day (from the hour roll-ups once an hour is over, so pruning leaves
//     it drawn), with their wait and run times (median and 95th
//     percentile), drawn as SVG charts; the runners seen in the last
//     minute.
//   - /jobs: every filter of GET /api/jobs as a form (folded on a phone),
//     newest first, keyset pages, with when each job is due (a scheduled
//     job due later also on its schedule's clock), finished, how long it
//     ran and its run; retry or cancel the jobs selected, or every
//     job that matches, after an in-page dialog that says which jobs in
//     words, how many, and shows the first; a retry's result, linked to
//     its audit entry, then says what the retried jobs (the first ten) did
//     since: completed, failed again, still to run.
//   - /jobs/{id}: a job's status, arguments (through the formatter), the
//     progress bar of a chunked job, which moves while it runs, and its
//     chunk times (the latest, slowest, fastest and average, the latest
//     50 drawn as bars with the slowest apart, and a table of them; also
//     for a kind the console's registry does not know, as under sheaf
//     serve, whose chunk size only the kind's registration says), the
//     timeline of its attempts with runners and errors, parents and
//     children as links (or the rules it holds up; for a completed parent
//     of a many-to-one rule whose job is not created yet, "waits for
//     parent #5" with the other parents of its period that have not
//     completed, linked), output, correlation
//     ID; why a QUEUED job waits ("retry in 57 min (attempt 2 of 3)", "due
//     tomorrow 23:00 Asia/Kolkata" on its schedule's clock, a paused queue, a closed window, "limit kind report reached (5 of 5
//     running)") with Run now or Retry now; what a
//     retry does to its attempt limit, said before; who cancelled it and
//     why (the reason its audit entry records); retry and cancel (with a
//     reason).
//   - /limits: the limits across every runner with their use; callers
//     allowed to pause queues set a limit's concurrency and rate (or a new
//     limit) with a form, and suspend, resume and remove limits (POST
//     /api/limits, which sets any limit, and /api/limits/remove), each
//     change audited.
//   - /runs, /runs/{id}: the runs of a night, and a run's morning review:
//     its counts, its wall time as the overview says it, failures grouped by error with their jobs, dependency
//     chains that stopped drawn as a small graph with the parent that
//     stopped each marked (chains whose parents are still to run are
//     called waiting), jobs waiting for a retry, slow jobs beside their
//     kind's median and 95th percentile (the factor and the history
//     adjustable, the baseline stated with how many jobs, or days of
//     roll-ups, it is taken over), jobs that never ran and why (those
//     still due, and those cancelled before they started with who
//     cancelled them and why, from the audit log, and the rules' jobs not
//     created, "waiting for parent #5" linked), missed ticks; retry each
//     failure group or the run's failed jobs. An unknown run is a 404.
//   - /schedules: each schedule on its own clock (last tick, from the tick
//     ledger, linked to its run; missed ticks; next ticks), and each batch
//     window, open or closed now, as of the client's clock (queue.WithClock).
//   - /audit: who did what through the console, newest first, to what
//     (in words, the jobs linked).
//
// Times read relative ("in 57 min", "3 h ago"), kept current, with the
// absolute time in the viewer's zone as their title. Below 600 px the
// tables of jobs and counts become cards; a dark theme follows the
// system's setting.
//   - /alerts, with WithAlerts: what fires, what a silence mutes, the
//     silences, and what resolved lately; silence a rule (or its kind and
//     queue) for an hour, or remove a silence.
//
// The pages are rendered on the server from templates, one stylesheet and
// one small script embedded in the package (go:embed): go get brings it all,
// there is no build step, and nothing is loaded from anywhere else (the
// pages carry a strict Content-Security-Policy). The script shows times in
// the viewer's zone, naming it (schedules stay on their own clocks);
// refreshes the live parts of a page every 5 s (every second on a job that
// has not finished), only while its tab is shown; and sends every action to
// the API, so actions pass the same authorizer, origin check and audit log
// as any other call. A caller who may not act sees no action buttons, and a
// forged request is refused with 403 anyway. The pages work at 1280 and at
// 390 pixels wide, from the keyboard, with every control labelled.
//
// The TestBrowser tests drive headless Chromium (Debian's
// chromium-headless-shell or chromium package, or the binary in
// SHEAF_CHROMIUM) against a real database, and save a screenshot each;
// without Chromium they skip, and with CI set they fail.
//
// # Errors
//
// Errors are JSON, {"error":{"code":"…","message":"…"}}, with the HTTP
// status that fits: the queue's typed errors map to codes such as
// unknown_kind and invalid_payload (422), invalid_option (400), not_found
// (404) and wrong_status (409). A query parameter that cannot be read is
// invalid_param (400), and the error names it in "param".
package console
