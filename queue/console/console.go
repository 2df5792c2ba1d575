package console

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/alert"
)

// Action is something a caller may be allowed to do.
type Action string

// The actions. ActionRead covers every GET; the others each change state.
const (
	ActionRead   Action = "read"
	ActionSubmit Action = "submit"
	ActionCancel Action = "cancel"
	ActionRetry  Action = "retry"
	ActionPause  Action = "pause"
	// ActionSilence silences alerts and removes silences (WithAlerts).
	ActionSilence Action = "silence"
)

// Access is what one caller may do, as the authorizer decides it.
type Access struct {
	// Read allows every GET.
	Read bool
	// Submit allows enqueueing jobs; Cancel and Retry allow cancelling
	// and retrying them, one or in bulk; Pause allows pausing and resuming
	// queues.
	Submit, Cancel, Retry, Pause bool
	// Silence allows silencing alerts and removing silences (WithAlerts).
	Silence bool
	// Actor names the caller in the audit log of the changes it makes
	// (queue.Client.AuditLog); when empty, the request's remote address
	// does.
	Actor string
}

// Allows reports whether a permits act.
func (a Access) Allows(act Action) bool {
	switch act {
	case ActionRead:
		return a.Read
	case ActionSubmit:
		return a.Submit
	case ActionCancel:
		return a.Cancel
	case ActionRetry:
		return a.Retry
	case ActionPause:
		return a.Pause
	case ActionSilence:
		return a.Silence
	}
	return false
}

// readOnly is the access of every caller when no authorizer is given.
var readOnly = Access{Read: true}

// Authorizer decides what the caller of a request may do. An error
// refuses the request with 401.
type Authorizer func(*http.Request) (Access, error)

// Submitter returns the claims of the caller of a request, stored with the
// jobs it submits as their queue.Auth. An error refuses the request with
// 401.
type Submitter func(*http.Request) (queue.Auth, error)

// ArgsFormatter rewrites a job's arguments before they are shown, to
// redact what operators should not see. It gets the job's kind and its
// arguments as stored, and returns what to show in their place.
type ArgsFormatter func(kind string, args json.RawMessage) json.RawMessage

// An Option configures New.
type Option func(*config) error

type config struct {
	authorize  Authorizer
	submitter  Submitter
	formatArgs ArgsFormatter
	logger     *slog.Logger
	origins    []string
	countsTTL  time.Duration
	alerts     *alert.Alerter // alerts.go
}

// WithAuthorizer sets the function that decides what each request's caller
// may do. Without one the console is read-only: any caller may read, and
// every request that would change state is refused with 403.
func WithAuthorizer(a Authorizer) Option {
	return func(c *config) error {
		if a == nil {
			return errors.New("console: nil Authorizer")
		}
		c.authorize = a
		return nil
	}
}

// WithSubmitter sets the function whose claims become the auth context
// (queue.AuthContext) of the jobs a request submits. Without one, jobs are
// submitted without claims.
func WithSubmitter(s Submitter) Option {
	return func(c *config) error {
		if s == nil {
			return errors.New("console: nil Submitter")
		}
		c.submitter = s
		return nil
	}
}

// WithArgsFormatter sets the function that every job's arguments pass
// through before any response shows them. Without one they are shown as
// stored. It does not change what GET /api/jobs?q= searches, the
// arguments as stored: a reader can still learn which jobs hold a value it
// guesses.
func WithArgsFormatter(f ArgsFormatter) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("console: nil ArgsFormatter")
		}
		c.formatArgs = f
		return nil
	}
}

// WithLogger sets the logger of the console's notices and its errors,
// among them the changes the audit log failed to take. Default
// slog.Default; nil discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
		return nil
	}
}

// WithTrustedOrigins lets browsers on these origins ("https://ops.example.com")
// send requests that change state, which requests from other origins may
// not (see http.CrossOriginProtection).
func WithTrustedOrigins(origins ...string) Option {
	return func(c *config) error {
		c.origins = append(c.origins, origins...)
		return nil
	}
}

// console serves the API of one client.
type console struct {
	client *queue.Client
	reg    *queue.Registry
	cfg    config
	csrf   *http.CrossOriginProtection
	mux    *http.ServeMux
	routes []route
	// statsCache and queuesCache are the counts that GET /api/stats and
	// GET /api/queues reuse (WithCountsCache).
	statsCache  cached[queue.Stats]
	queuesCache cached[[]queue.QueueInfo]
	// activity is the overview's series of each of spans.
	activity [2]cached[[]queue.ActivityBucket]
	// days is the overview's chart of days (history.go).
	days cached[[]queue.DayStats]
	// night is the overview's latest run of each schedule (night.go);
	// recent the newest runs, which it and a run's page compare runs with.
	night  cached[[]nightView]
	recent cached[[]queue.RunSummary]
	// window is SearchWindow, but in tests.
	window int64
}

// New returns the console of client. Without WithAuthorizer it is
// read-only, and says so once in its log.
func New(client *queue.Client, opts ...Option) (http.Handler, error) {
	if client == nil {
		return nil, errors.New("console: nil *queue.Client")
	}
	cfg := config{logger: slog.Default(), countsTTL: DefaultCountsTTL}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("console: nil Option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	c := &console{client: client, reg: client.Registry(), cfg: cfg, csrf: http.NewCrossOriginProtection(), window: SearchWindow}
	for _, o := range cfg.origins {
		if err := c.csrf.AddTrustedOrigin(o); err != nil {
			return nil, errors.New("console: " + err.Error())
		}
	}
	if cfg.authorize == nil {
		cfg.logger.Warn("console: no authorizer (console.WithAuthorizer); the API is read-only and refuses every change with 403")
	}
	c.routes = c.table()
	c.mux = http.NewServeMux()
	for _, rt := range c.routes {
		c.mux.Handle(rt.Method+" "+rt.Pattern, c.serve(rt))
	}
	if err := c.mountPages(); err != nil {
		return nil, err
	}
	return c, nil
}

// ServeHTTP serves the API and the dashboard, and answers requests for
// what it does not serve with an error: in JSON under /api/, as every
// other of the API's; a page elsewhere.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := c.mux.Handler(r); pattern != "" {
		c.mux.ServeHTTP(w, r)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		c.writePageError(w, r, &apiError{Status: http.StatusNotFound, Code: "no_page", Message: "There is no such page."})
		return
	}
	// The mux would answer 404, 405 or a redirect to a clean path: learn
	// which, and answer it in JSON.
	rec := &recorder{header: http.Header{}}
	c.mux.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: r.Method + " is not allowed here; allowed: " + rec.header.Get("Allow")})
	case http.StatusNotFound:
		writeError(w, &apiError{Status: http.StatusNotFound, Code: "no_route", Message: "no such endpoint; see /api/openapi.json"})
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
	}
}

// recorder keeps what the mux answers a request it has no route for.
type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
