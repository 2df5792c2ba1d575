//go:build race

package readme

// buildFlags are the go command's build flags this test binary was built
// with that change what a build compiles: vetting the README's programs
// with them reuses the packages go test -race compiled for the tests,
// rather than compiling the module a second time without -race.
var buildFlags = []string{"-race"}
