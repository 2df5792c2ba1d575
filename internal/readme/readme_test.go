// Package readme holds the tests that keep the repository's README.md true
// to the code: every Go program in it builds, and the Go version it asks
// for is the one go.mod states, and it stays short.
package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

// root is the module's root, two levels above this package.
const root = "../.."

// block is a fenced code block of README.md.
type block struct {
	line int // of the opening fence, 1-based
	lang string
	text string
}

// codeBlocks returns the fenced code blocks of a Markdown text.
func codeBlocks(md string) ([]block, error) {
	var (
		out  []block
		cur  *block
		body strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		switch {
		case cur == nil && fence:
			cur = &block{line: n, lang: strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "```"))}
			body.Reset()
		case cur != nil && fence:
			cur.text = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md:%d: code block never closed", cur.line)
	}
	return out, sc.Err()
}

func TestCodeBlocks(t *testing.T) {
	blocks, err := codeBlocks("a\n```go\npackage main\n```\ntext\n```\ngo get x\n```\n")
	require.NoError(t, err)
	require.Equal(t, []block{{line: 2, lang: "go", text: "package main\n"}, {line: 6, lang: "", text: "go get x\n"}}, blocks)

	_, err = codeBlocks("a\n\n```go\npackage main\n")
	require.EqualError(t, err, "README.md:3: code block never closed")
}

// TestProgramsBuild compiles every Go block of the README, each a complete
// program, in a directory of its own inside the module, so that it builds
// against this very code with the module's go.mod and go.sum. Only
// compiling: running them would need their databases and wait for their
// jobs. go vet type-checks each program as the compiler does, and vets it,
// without linking it: a pure Go program that type-checks links, and the
// link of the queue's program took most of the test's time (13 s of 15 s
// on a loaded machine).
func TestProgramsBuild(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := codeBlocks(string(md))
	require.NoError(t, err)
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build the README's programs")

	programs := 0
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		if !strings.HasPrefix(b.text, "package ") {
			t.Errorf("README.md:%d: a Go block that is not a complete program (it must start with its package clause, so that it can be copied and built)", b.line)
			continue
		}
		programs++
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			// Inside the module, so that the program builds against this
			// code with go.mod and go.sum; a leading underscore keeps
			// ./... patterns (and git, see .gitignore) away from it.
			dir, err := os.MkdirTemp(root, "_readme")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.text), 0o644))

			cmd := exec.Command(goCmd, append(append([]string{"vet"}, buildFlags...), "./"+filepath.Base(dir))...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("README.md:%d: the program does not compile (%v; line n of main.go is line %d+n of README.md):\n%s", b.line, err, b.line, out)
			}
		})
	}
	require.GreaterOrEqual(t, programs, 2, "README.md should hold a first program for the engine and one for the queue")
}

var (
	readmeGo = regexp.MustCompile(`Go (1\.[0-9]+(?:\.[0-9]+)?) or later`)
	goModGo  = regexp.MustCompile(`(?m)^go ([0-9.]+)\s*$`)
)

// TestGoVersion checks that the README asks for the Go version go.mod
// states, and for no other.
func TestGoVersion(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)

	m := goModGo.FindSubmatch(mod)
	require.NotNil(t, m, "go.mod has no go line")
	want := string(m[1])

	stated := readmeGo.FindAllSubmatch(md, -1)
	require.NotEmpty(t, stated, `README.md does not say which Go it needs ("Go %s or later")`, want)
	for _, s := range stated {
		line := 1 + bytes.Count(md[:bytes.Index(md, s[0])], []byte("\n"))
		require.Equal(t, want, string(s[1]), "README.md:%d says Go %s or later; go.mod's go line says %s", line, s[1], want)
	}
}

// maxLines is the most README.md may have: a front door a newcomer reads
// in ten minutes, the details being in the packages' documentation.
const maxLines = 300

// TestLength keeps the README a front door.
func TestLength(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	n := bytes.Count(md, []byte("\n"))
	require.LessOrEqual(t, n, maxLines, "README.md has %d lines; move details into the packages' doc.go or the examples' READMEs", n)
}
