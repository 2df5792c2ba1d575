//go:build !race

package readme

// buildFlags: see race_test.go.
var buildFlags []string
