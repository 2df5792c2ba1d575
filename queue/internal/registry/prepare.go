package registry

import (
	"fmt"
	"reflect"

	"github.com/sheaf-dev/sheaf/queue/internal/check"
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
	return p.row(k, payload, opts)
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
	return p.row(k, payload, opts)
}

func (p Preparer[W, F, S, O]) row(k *Kind[option.Job, W], payload []byte, opts []O) (store.NewJob, error) {
	// o stays on the stack, and the job points at copies of the options it
	// has: a bulk of jobs without options then costs no allocation here.
	o := k.Defaults
	if len(opts) > 0 {
		var err error
		if o, err = applied(o, opts, p.Apply); err != nil {
			return store.NewJob{}, err
		}
	}
	return o.Row(k.Name, payload)
}

// applied returns a kind's defaults o with a job's options applied.
func applied[O any](o option.Job, opts []O, apply func(O, *option.Job) error) (option.Job, error) {
	err := check.Each("EnqueueOption", opts, func(opt O) error { return apply(opt, &o) })
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
