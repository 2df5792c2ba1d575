package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/browsertest"
	"github.com/sheaf-dev/sheaf/internal/testexit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(browsertest.Main(m), testexit.Option()) }

// start runs the program with o on a new SQLite file and returns the base
// URL it serves, and a function that stops it and returns run's error.
func start(t *testing.T, o options) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	o.addr, o.ready = "127.0.0.1:0", func(addr string) { addrs <- addr }
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- run(ctx, o, &out) }()
	select {
	case addr := <-addrs:
		return "http://" + addr, func() error {
			cancel()
			return <-done
		}
	case err := <-done:
		cancel()
		t.Fatalf("run returned before serving: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("the server did not start within a minute")
	}
	return "", nil
}

// call sends a request and returns the status and the decoded body.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return res.StatusCode, v
}

// TestReadOnly refuses every change.
func TestReadOnly(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	base, stop := start(t, options{readOnly: true})
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	for _, path := range []string{"/api/queues/default/pause", "/api/jobs/1/cancel"} {
		if status, body := call(t, "POST", base+path, ""); status != http.StatusForbidden {
			t.Errorf("POST %s: %d %v", path, status, body)
		}
	}
	if status, body := call(t, "POST", base+"/api/jobs", `{"kind":"export"}`); status != http.StatusForbidden {
		t.Errorf("submit: %d %v", status, body)
	}
	if status, _ := call(t, "GET", base+"/api/stats", ""); status != http.StatusOK {
		t.Errorf("stats: %d", status)
	}
}
