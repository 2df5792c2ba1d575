package registry

import (
	"fmt"
	"reflect"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
	"github.com/sheaf-dev/sheaf/queue/internal/hook"
	"github.com/sheaf-dev/sheaf/queue/internal/option"
	"github.com/sheaf-dev/sheaf/queue/internal/runner"
	"github.com/sheaf-dev/sheaf/queue/internal/store"
)

// Preparer checks jobs of a registry's kinds and prepares their rows, as
// enqueue calls, schedules' ticks and dependency rules give them: the
// payload a value of the kind's type or JSON that decodes into it, the
// job's options, of type O, over the kind's defaults. Nothing is stored.
type Preparer[W, F any, S runner.Schedule, O any] struct {
	Registry *Registry[option.Job, W, F, S]
	// Apply applies one of a job's options.
	Apply func(O, *option.Job) error
	// Unknown is the error a kind that is not registered wraps.
	Unknown error
}

// Args prepares a job given as args, a value of its kind's registered
// type.
func (p Preparer[W, F, S, O]) Args(args interface{ Kind() string }, opts []O) (store.NewJob, error) {
	return p.stamped(args, opts, nil)
}

// Raw prepares a job of kind given as JSON, which must decode into the
// kind's type and be what jsonb stores as given.
func (p Preparer[W, F, S, O]) Raw(kind string, payload []byte, opts []O) (store.NewJob, error) {
	k, err := p.Registry.Lookup(kind, p.Unknown)
	if err == nil {
		err = k.CheckPayload(payload)
	}
	if err != nil {
		return store.NewJob{}, err
	}
	return p.row(k, payload, opts, nil)
}

// Stamped prepares the jobs that build returns (n of them, the ith
// job(i)) as a schedule's tick and a dependency rule create them: as Args
// does, each stamped over its own options with the idempotency key key(i),
// and with runID and period unless empty. The first that fails fails them
// all, Numbered; none is none. A panic in build, or in a payload's Kind or
// MarshalJSON, is an error: that is the user's code, run on a runner's
// goroutine.
func (p Preparer[W, F, S, O]) Stamped(build func() (n int, job func(i int) (interface{ Kind() string }, []O)),
	key func(i int) string, runID, period string) (rows []store.NewJob, err error) {
	err = hook.Call(func() error {
		n, job := build()
		if n == 0 {
			return nil
		}
		var err error
		rows, err = All(n, func(i int) (store.NewJob, error) {
			args, opts := job(i)
			return p.stamped(args, opts, func(o *option.Job) error { return o.Stamp(key(i), runID, period) })
		}, Numbered)
		return err
	})
	return rows, err
}

// stamped is Args with stamp, if not nil, applied after the job's options.
func (p Preparer[W, F, S, O]) stamped(args interface{ Kind() string }, opts []O, stamp func(*option.Job) error) (store.NewJob, error) {
	// A nil pointer's Kind would panic in the caller's code.
	if args == nil || reflect.ValueOf(args).Kind() == reflect.Pointer && reflect.ValueOf(args).IsNil() {
		return store.NewJob{}, fmt.Errorf("%w: nil args", check.ErrInvalidPayload)
	}
	k, err := p.Registry.Lookup(args.Kind(), p.Unknown)
	if err != nil {
		return store.NewJob{}, err
	}
	payload, err := k.Encode(args)
	if err != nil {
		return store.NewJob{}, err
	}
	return p.row(k, payload, opts, stamp)
}

func (p Preparer[W, F, S, O]) row(k *Kind[option.Job, W], payload []byte, opts []O, stamp func(*option.Job) error) (store.NewJob, error) {
	// o stays on the stack, and the job points at copies of the options it
	// has: a bulk of jobs without options then costs no allocation here.
	o := k.Defaults
	if len(opts) > 0 || stamp != nil {
		var err error
		if o, err = applied(o, opts, p.Apply, stamp); err != nil {
			return store.NewJob{}, err
		}
	}
	return o.Row(k.Name, payload)
}

// applied returns a kind's defaults o with a job's options applied, then
// stamp if it is not nil.
func applied[O any](o option.Job, opts []O, apply func(O, *option.Job) error, stamp func(*option.Job) error) (option.Job, error) {
	err := check.Each("EnqueueOption", opts, func(opt O) error { return apply(opt, &o) })
	if err == nil && stamp != nil {
		err = stamp(&o)
	}
	return o, err
}

// All prepares n jobs, the ith with prepare(i), for a call that stores
// them all or none: the first that fails fails the call, with wrap of its
// place and error. No jobs is ErrInvalidOption.
func All(n int, prepare func(i int) (store.NewJob, error), wrap func(i int, err error) error) ([]store.NewJob, error) {
	if n == 0 {
		return nil, check.Invalid("no jobs")
	}
	rows := make([]store.NewJob, n)
	for i := range rows {
		var err error
		if rows[i], err = prepare(i); err != nil {
			return nil, wrap(i, err)
		}
	}
	return rows, nil
}

// Numbered names a job's error with its place in its call, from 0.
func Numbered(i int, err error) error { return fmt.Errorf("job %d: %w", i, err) }
