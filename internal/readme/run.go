// Package readme holds the tests that keep the repository's README.md true
// to the code: its Go programs are the ones in engine and queue, whose
// tests build and run them; the Go version it asks for is the one go.mod
// states; and it stays short.
package readme

import (
	"io"
	"os"
	"testing"
)

// Run runs a README program's main in a directory of its own, as a reader
// who copied it would, and returns what it printed. A main that calls
// log.Fatal ends the test binary, and the test with it.
func Run(t *testing.T, main func()) string {
	t.Chdir(t.TempDir())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan string, 1)
	go func() {
		out, _ := io.ReadAll(r)
		r.Close()
		read <- string(out)
	}()
	stdout := os.Stdout
	os.Stdout = w
	func() {
		defer func() { os.Stdout = stdout; w.Close() }()
		main()
	}()
	out := <-read
	t.Logf("the program printed:\n%s", out)
	return out
}
