package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Dependency is a rule with the kind of its child.
type Dependency struct {
	Rule
	ChildKind string
}

// Registered is a dependency rule as a registry holds it, with the
// function F that builds its child.
type Registered[F any] struct {
	Dependency
	Child F
}

// RuleSet is a registry's dependency rules; the registry guards it.
type RuleSet[F any] []*Registered[F]

// Add adds ru, unless its name is taken or it would close a cycle: a kind
// that waits, through rules, for itself.
func (rs *RuleSet[F]) Add(ru *Registered[F]) error {
	if rs.Named(ru.Name) != nil {
		return fmt.Errorf("rule %q registered twice", ru.Name)
	}
	if rs.reaches(ru.ChildKind, ru.Parents) {
		return fmt.Errorf("rule %q would make a cycle: %q already waits, through other rules, for %q", ru.Name, ru.Parents, ru.ChildKind)
	}
	*rs = append(*rs, ru)
	return nil
}

// Named returns the rule called name, or nil.
func (rs RuleSet[F]) Named(name string) *Registered[F] {
	for _, ru := range rs {
		if ru.Name == name {
			return ru
		}
	}
	return nil
}

// For returns the rules in which kind is a parent, or every rule for "",
// by name, so that their locks are always taken in the same order; never
// nil.
func (rs RuleSet[F]) For(kind string) []*Registered[F] {
	out := []*Registered[F]{}
	for _, ru := range rs {
		if kind == "" || slices.Contains(ru.Parents, kind) {
			out = append(out, ru)
		}
	}
	slices.SortFunc(out, func(a, b *Registered[F]) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// reaches reports whether any of targets is from, or is released, through
// rules, by a job of kind from.
func (rs RuleSet[F]) reaches(from string, targets []string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if slices.Contains(targets, k) {
			return true
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, ru := range rs {
			if slices.Contains(ru.Parents, k) {
				stack = append(stack, ru.ChildKind)
			}
		}
	}
	return false
}

// ScheduleSet is a registry's schedules by name; it tells of changes.
type ScheduleSet[S Schedule] struct {
	mu      sync.RWMutex
	byName  map[string]S
	changed chan struct{} // closed and replaced when the set changes
}

// NewScheduleSet returns an empty set.
func NewScheduleSet[S Schedule]() *ScheduleSet[S] {
	return &ScheduleSet[S]{byName: map[string]S{}, changed: make(chan struct{})}
}

// Put adds s, or replaces the schedule of its name.
func (ss *ScheduleSet[S]) Put(s S) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.byName[s.Timing().Name] = s
	ss.changedLocked()
}

// Delete removes the schedule called name and reports whether there was
// one.
func (ss *ScheduleSet[S]) Delete(name string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.byName[name]
	delete(ss.byName, name)
	ss.changedLocked()
	return ok
}

func (ss *ScheduleSet[S]) changedLocked() {
	close(ss.changed)
	ss.changed = make(chan struct{})
}

// Now returns the schedules and a channel closed when they change.
func (ss *ScheduleSet[S]) Now() (map[string]S, <-chan struct{}) {
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	return maps.Clone(ss.byName), ss.changed
}

// Sorted returns the schedules sorted by name.
func (ss *ScheduleSet[S]) Sorted() []S {
	m, _ := ss.Now()
	return slices.SortedFunc(maps.Values(m), func(a, b S) int { return strings.Compare(a.Timing().Name, b.Timing().Name) })
}
