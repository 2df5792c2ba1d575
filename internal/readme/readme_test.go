package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
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

// programs are the files that hold the README's Go blocks, in order: each
// a package of its own, whose test builds and runs it, so go test ./...
// builds them with the rest of the module, once.
var programs = []string{"engine/main.go", "queue/main.go"}

// TestProgramsAreTested checks that every Go block of the README is, byte
// for byte, the program in one of programs, so that what a reader copies
// is what their tests build and run.
func TestProgramsAreTested(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := codeBlocks(string(md))
	require.NoError(t, err)
	n := 0
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		if n == len(programs) {
			t.Errorf("README.md:%d: a Go block with no program of its own: add one to programs, with a test that runs it", b.line)
			continue
		}
		want, err := os.ReadFile(programs[n])
		require.NoError(t, err)
		if b.text != string(want) {
			t.Errorf("README.md:%d: the Go block is not internal/readme/%s, which its test builds and runs: make them the same", b.line, programs[n])
		}
		n++
	}
	require.Equal(t, len(programs), n, "README.md should hold a first program for the engine and one for the queue")
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
