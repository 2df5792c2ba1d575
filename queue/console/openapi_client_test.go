package console_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
)

// The client generator and the runtime its code imports. Neither is a
// dependency of sheaf: the test fetches them through the module proxy into
// the module cache, and builds the generated client in a module of its own.
const (
	oapiCodegen    = "github.com/oapi-codegen/oapi-codegen/v2@v2.8.2"
	oapiCodegenCmd = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"
	oapiRuntime    = "github.com/oapi-codegen/runtime@v1.9.0"
)

// clientProgram calls the console with the client oapi-codegen generated
// from its document, and prints what it got as JSON lines, for the test
// to compare with what the queue holds.
const clientProgram = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func show(step string, status int, v any) {
	b, _ := json.Marshal(map[string]any{"step": step, "status": status, "body": v})
	fmt.Println(string(b))
}

func run(base string) error {
	ctx := context.Background()
	c, err := NewClientWithResponses(base)
	if err != nil {
		return err
	}
	kind, queue, reason := "report", "exports", "a generated client's cancel"
	made, err := c.PostJobsWithResponse(ctx, EnqueueRequest{Kind: &kind, Queue: &queue, Args: map[string]any{"county": "Travis"}})
	if err != nil {
		return err
	}
	show("enqueue", made.StatusCode(), made.JSON201)
	if made.JSON201 == nil || made.JSON201.Job == nil || made.JSON201.Job.Id == nil {
		return fmt.Errorf("enqueue: %d %s", made.StatusCode(), made.Body)
	}
	id := strconv.FormatInt(*made.JSON201.Job.Id, 10)
	got, err := c.GetJobsByIdWithResponse(ctx, id)
	if err != nil {
		return err
	}
	show("get", got.StatusCode(), got.JSON200)
	list, err := c.GetJobsWithResponse(ctx, &GetJobsParams{Queue: &queue})
	if err != nil {
		return err
	}
	show("list", list.StatusCode(), list.JSON200)
	cancelled, err := c.PostJobsByIdCancelWithResponse(ctx, id, PostJobsByIdCancelJSONRequestBody{Reason: &reason})
	if err != nil {
		return err
	}
	show("cancel", cancelled.StatusCode(), cancelled.JSON200)
	missing, err := c.GetJobsByIdWithResponse(ctx, "999999999")
	if err != nil {
		return err
	}
	show("missing", missing.StatusCode(), missing.JSON404)
	queues, err := c.GetQueuesWithResponse(ctx)
	if err != nil {
		return err
	}
	show("queues", queues.StatusCode(), queues.JSON200)
	return nil
}
`

// TestOpenAPIGeneratesAWorkingClient generates a Go client from the
// console's OpenAPI document with oapi-codegen, builds it, and calls the
// live API with it: the document is one a client generator can use, its
// shared schemas decode what the API sends, and its error responses
// decode what the API answers. It needs the module proxy (or a module
// cache that holds both modules); without it, it skips, or fails under CI.
func TestOpenAPIGeneratesAWorkingClient(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no go command to build the client with: %v", err)
		}
		t.Skipf("no go command to build the client with: %v", err)
	}
	dir := t.TempDir()
	gocmd := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = dir
		// The module is the test's own, resolved against the proxy (not a
		// workspace, not the library's go.mod), without the test's flags.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		return cmd.CombinedOutput()
	}
	if out, err := gocmd("mod", "download", oapiCodegen, oapiRuntime); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("go mod download %s %s: %v\n%s", oapiCodegen, oapiRuntime, err, out)
		}
		t.Skipf("the toolchain cannot fetch %s and %s from the module proxy: %v\n%s", oapiCodegen, oapiRuntime, err, out)
	}

	e := newEnv(t, console.WithAuthorizer(allowAll))
	doc := e.do(t, "GET", "/api/openapi.json", "").body
	runtime, version, _ := strings.Cut(oapiRuntime, "@")
	for name, text := range map[string]string{
		"openapi.json": string(doc),
		"codegen.yaml": "package: main\noutput: client.gen.go\ngenerate:\n  models: true\n  client: true\n",
		"go.mod":       "module sheafclient\n\ngo 1.24\n\nrequire " + runtime + " " + version + "\n",
		"main.go":      clientProgram,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	out, err := gocmd("run", oapiCodegenCmd, "-config", "codegen.yaml", "openapi.json")
	require.NoError(t, err, "oapi-codegen:\n%s", out)
	out, err = gocmd("build", "-o", "client", ".")
	require.NoError(t, err, "the generated client does not build:\n%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err = exec.CommandContext(ctx, filepath.Join(dir, "client"), e.srv.URL).Output()
	require.NoError(t, err, "the client program: %s", out)

	type step struct {
		Step   string
		Status int
		Body   json.RawMessage
	}
	steps := map[string]step{}
	for line := range strings.Lines(string(out)) {
		var s step
		require.NoError(t, json.Unmarshal([]byte(line), &s), line)
		steps[s.Step] = s
	}
	require.Len(t, steps, 6, "%s", out)
	var made struct{ Job struct{ ID int64 } }
	require.Equal(t, 201, steps["enqueue"].Status)
	require.NoError(t, json.Unmarshal(steps["enqueue"].Body, &made))
	id := made.Job.ID
	rec, err := e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "report", rec.Kind)
	require.Equal(t, "exports", rec.Queue)
	require.JSONEq(t, `{"county":"Travis"}`, string(rec.Payload))

	require.Equal(t, 200, steps["get"].Status)
	require.Contains(t, string(steps["get"].Body), `"id":`+strconv.FormatInt(id, 10))
	require.Contains(t, string(steps["get"].Body), `"status":"QUEUED"`)
	require.Contains(t, string(steps["list"].Body), `"id":`+strconv.FormatInt(id, 10))
	require.Equal(t, 200, steps["cancel"].Status)
	require.Contains(t, string(steps["cancel"].Body), `"status":"CANCELLED"`)
	rec, err = e.client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, queue.StatusCancelled, rec.Status)
	entries, err := e.client.AuditLog(context.Background(), 0, 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"job":`+strconv.FormatInt(id, 10)+`,"reason":"a generated client's cancel"}`, string(entries[0].Target))
	require.Equal(t, 404, steps["missing"].Status)
	require.Contains(t, string(steps["missing"].Body), `"code":"not_found"`, "the 404 decodes as the Error schema")
	require.Contains(t, string(steps["queues"].Body), `"name":"exports"`)
}
