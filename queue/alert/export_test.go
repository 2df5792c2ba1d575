package alert

// ReadAtMost makes r read at most n FAILED jobs a round, as if n were the
// limit, so that a test reaches it with a few jobs.
func ReadAtMost(r *DeadRule, n int) *DeadRule { r.limit = n; return r }
