//go:build !race

package queue_test

// raceOn is set under -race, where tests that enqueue many jobs enqueue fewer.
const raceOn = false
