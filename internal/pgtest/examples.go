package pgtest

import (
	"context"
	"errors"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Examples gives a package's runnable examples, which have no testing.TB, a
// schema each on the test server, and drops them all at Close. TestMain
// makes one, and runs the examples only when Reachable says a server answers
// (or CI is set, so that they fail rather than vanish).
type Examples struct {
	mu      sync.Mutex
	schemas []string
	closers []func() error
}

// Reachable reports whether the test server answers, and why not.
func Reachable() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := connect(ctx, BaseDSN())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// Open creates a schema and returns a gorm handle on it, its pool sized as
// New's.
func (e *Examples) Open() (*gorm.DB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := BaseDSN()
	admin, err := connect(ctx, base)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	schema, err := createSchema(ctx, admin, "sheaf_example_")
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.schemas = append(e.schemas, schema)
	e.mu.Unlock()
	_, gdb, sqlDB, err := open(base, schema)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.closers = append(e.closers, sqlDB.Close)
	e.mu.Unlock()
	return gdb, nil
}

// Close closes the handles Open returned and drops their schemas.
func (e *Examples) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, c := range e.closers {
		errs = append(errs, c())
	}
	for _, schema := range e.schemas {
		if err := dropSchema(BaseDSN(), schema); err != nil {
			errs = append(errs, err)
		}
	}
	e.closers, e.schemas = nil, nil
	return errors.Join(errs...)
}
