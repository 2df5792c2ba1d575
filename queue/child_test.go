package queue_test

// runChild runs the child-process role of the multi-process tests when the
// environment asks for it, and reports whether it did.
func runChild() bool { return false }
