// Package registry holds what package queue's Registry holds, under one
// lock: the job kinds with their defaults and handlers, the dependency
// rules, the queues' batch windows and the schedules. It is generic over
// queue's types, which it cannot import: O, a kind's options; W, its work
// function; F, a rule's child function; S, a schedule.
package registry

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sheaf-dev/sheaf/queue/internal/calendar"
	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/payload"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
)

// Kind is a registered job kind.
type Kind[O, W any] struct {
	Name     string
	ArgsType reflect.Type
	Plain    bool // ArgsType is payload.Plain
	Chunked  bool
	Defaults O
	// Work decodes a job's payload and runs its handler.
	Work W
}

// NewKind returns the kind of args type A, named name, with defaults.
func NewKind[A any, O, W any](name string, chunked bool, defaults O, work W) *Kind[O, W] {
	t := reflect.TypeFor[A]()
	return &Kind[O, W]{Name: name, ArgsType: t, Plain: payload.Plain(t), Chunked: chunked, Defaults: defaults, Work: work}
}

// Encode returns args, a value of the kind's type, as the JSON stored, or
// an error wrapping check.ErrInvalidPayload.
func (k *Kind[O, W]) Encode(args any) ([]byte, error) {
	if t := reflect.TypeOf(args); t != k.ArgsType {
		return nil, fmt.Errorf("%w: kind %q is registered with %v, got %v", check.ErrInvalidPayload, k.Name, k.ArgsType, t)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", check.ErrInvalidPayload, err)
	}
	return b, check.Encoded("args", args, b, k.Plain)
}

// CheckPayload refuses a JSON payload given as such (queue's EnqueueRaw)
// that does not decode into the kind's type, or that jsonb would refuse.
func (k *Kind[O, W]) CheckPayload(b []byte) error {
	if err := json.Unmarshal(b, reflect.New(k.ArgsType).Interface()); err != nil {
		return fmt.Errorf("%w: kind %q wants %v: %v", check.ErrInvalidPayload, k.Name, k.ArgsType, err)
	}
	return check.Raw(b)
}

// Registry is a registry's kinds, rules, windows and schedules.
type Registry[O, W, F any, S runner.Schedule] struct {
	mu      sync.RWMutex
	kinds   map[string]*Kind[O, W]
	rules   runner.RuleSet[F]
	windows map[string]calendar.Window // by queue
	window  func(O) calendar.Window    // a kind's, from its options
	// Schedules guards itself.
	Schedules *runner.ScheduleSet[S]
}

// New returns an empty registry; window reads a kind's batch window from
// its options.
func New[O, W, F any, S runner.Schedule](window func(O) calendar.Window) *Registry[O, W, F, S] {
	return &Registry[O, W, F, S]{kinds: map[string]*Kind[O, W]{}, windows: map[string]calendar.Window{},
		window: window, Schedules: runner.NewScheduleSet[S]()}
}

// Kinds returns the registered kinds, sorted.
func (r *Registry[O, W, F, S]) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kindsLocked()
}

func (r *Registry[O, W, F, S]) kindsLocked() []string {
	return slices.Sorted(maps.Keys(r.kinds))
}

// Lookup returns the kind called name, or an error wrapping unknown that
// lists the registered kinds.
func (r *Registry[O, W, F, S]) Lookup(name string, unknown error) (*Kind[O, W], error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k := r.kinds[name]
	if k == nil {
		return nil, fmt.Errorf("%w %q (registered: %v)", unknown, name, r.kindsLocked())
	}
	return k, nil
}

// Add registers k, unless its name is taken.
func (r *Registry[O, W, F, S]) Add(k *Kind[O, W]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds[k.Name] != nil {
		return check.Invalid("kind %q registered twice", k.Name)
	}
	r.kinds[k.Name] = k
	return nil
}

// All yields every kind by name, holding the registry's lock.
func (r *Registry[O, W, F, S]) All(yield func(string, *Kind[O, W]) bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for name, k := range r.kinds {
		if !yield(name, k) {
			return
		}
	}
}

// AddRule registers ru, whose child is of type child: every kind it names
// must be registered, its name free, and it must close no cycle.
func (r *Registry[O, W, F, S]) AddRule(ru *runner.Registered[F], child reflect.Type) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.kinds[ru.ChildKind]; k == nil || k.ArgsType != child {
		return check.Invalid("rule %q: child kind %q is not registered with %v", ru.Name, ru.ChildKind, child)
	}
	for _, p := range ru.Parents {
		if r.kinds[p] == nil {
			return check.Invalid("rule %q: parent kind %q is not registered", ru.Name, p)
		}
	}
	if err := r.rules.Add(ru); err != nil {
		return check.Invalid("%v", err)
	}
	return nil
}

// RulesFor returns the rules in which kind is a parent, or every rule for
// "", by name.
func (r *Registry[O, W, F, S]) RulesFor(kind string) []*runner.Registered[F] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rules.For(kind)
}

// Rule returns the rule called name, or nil.
func (r *Registry[O, W, F, S]) Rule(name string) *runner.Registered[F] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rules.Named(name)
}

// SetQueueWindow restricts queue to w.
func (r *Registry[O, W, F, S]) SetQueueWindow(queue string, w calendar.Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows[queue] = w
}

// ClosedWindow returns the window that keeps a job of kind on queue from
// starting at t: the queue's, else the kind's; ok is false if neither is
// closed.
func (r *Registry[O, W, F, S]) ClosedWindow(kind, queue string, t time.Time) (w calendar.Window, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if qw := r.windows[queue]; !qw.Open(t) {
		return qw, true
	}
	if k := r.kinds[kind]; k != nil && !r.window(k.Defaults).Open(t) {
		return r.window(k.Defaults), true
	}
	return calendar.Window{}, false
}

// WindowRule is a queue's window, with Kind empty, or a kind's, with Queue
// empty.
type WindowRule struct {
	Queue, Kind string
	Window      calendar.Window
}

// Windows returns the windows that ever close: the queues' by name, then
// the kinds' by name.
func (r *Registry[O, W, F, S]) Windows() []WindowRule {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var qs, ks []WindowRule
	for q, w := range r.windows {
		if w.Closes() {
			qs = append(qs, WindowRule{Queue: q, Window: w})
		}
	}
	for k, w := range r.windowsLocked().Kinds {
		if w.Closes() {
			ks = append(ks, WindowRule{Kind: k, Window: w})
		}
	}
	byName := func(a, b WindowRule) int { return strings.Compare(a.Queue+a.Kind, b.Queue+b.Kind) }
	slices.SortFunc(qs, byName)
	slices.SortFunc(ks, byName)
	return append(qs, ks...)
}

// windowsLocked returns the registry's windows; the caller holds r.mu.
func (r *Registry[O, W, F, S]) windowsLocked() calendar.Windows {
	return calendar.Windows{Queues: r.windows, Kinds: func(yield func(string, calendar.Window) bool) {
		for name, k := range r.kinds {
			if !yield(name, r.window(k.Defaults)) {
				return
			}
		}
	}}
}

// Closed returns, at now, the queues of queues whose window is closed and
// the kinds whose window is (see calendar.Windows.Closed).
func (r *Registry[O, W, F, S]) Closed(now time.Time, queues []string) (map[string]bool, []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.windowsLocked().Closed(now, queues)
}

// NextOpening returns when the next closed window of queues, or of a kind,
// opens; zero if none is closed.
func (r *Registry[O, W, F, S]) NextOpening(now time.Time, queues []string) time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.windowsLocked().NextOpening(now, queues)
}

// CheckRule refuses a malformed rule: a bad name, no parent kinds, more
// than one for a one-to-one rule (each), or no child function.
func CheckRule(name string, parents int, each, noChild bool) error {
	switch err := check.Name("rule name", "rule name", name, 200); {
	case err != nil:
		return err
	case noChild:
		return check.Invalid("rule %q: nil child function", name)
	case parents == 0 || (each && parents != 1):
		return check.Invalid("rule %q: needs parent kinds, exactly one for a one-to-one rule", name)
	}
	return nil
}
