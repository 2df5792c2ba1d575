package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/sheaf-dev/sheaf/queue"
	"github.com/sheaf-dev/sheaf/queue/console"
	"github.com/sheaf-dev/sheaf/queue/sqlitedb"
)

// Mount the console under /ops/ of a server of yours, with an authorizer
// that reads the caller's token: operators may read and retry, only admins
// may submit and cancel. The same server serves your own routes beside it.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "console-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitedb.Open(filepath.Join(dir, "jobs.db")) // or a PostgreSQL *gorm.DB
	if err != nil {
		log.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()

	reg := queue.NewRegistry()
	if err := registerReport(reg); err != nil {
		log.Fatal(err)
	}
	client, err := queue.NewClient(db, reg)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Migrate(context.Background()); err != nil {
		log.Fatal(err)
	}

	authorize := func(r *http.Request) (console.Access, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer admin-token":
			return console.Access{Read: true, Submit: true, Cancel: true, Retry: true, Pause: true, Actor: "admin"}, nil
		case "Bearer operator-token":
			return console.Access{Read: true, Retry: true, Actor: "operator"}, nil
		}
		return console.Access{}, errors.New("unknown token")
	}
	h, err := console.New(client, console.WithAuthorizer(authorize), console.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(token, method, path, body string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		var out struct {
			Job   *struct{ Kind, Status string }
			Error *struct{ Code string }
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			log.Fatal(err)
		}
		switch {
		case out.Job != nil:
			fmt.Println(method, path, res.StatusCode, out.Job.Kind, out.Job.Status)
		case out.Error != nil:
			fmt.Println(method, path, res.StatusCode, out.Error.Code)
		}
	}
	send("admin-token", "POST", "/ops/api/jobs", `{"kind":"report","args":{"county":"Travis"}}`)
	send("operator-token", "POST", "/ops/api/jobs/1/cancel", "")
	send("operator-token", "GET", "/ops/api/jobs/1", "")
	send("nobody", "GET", "/ops/api/jobs/1", "")
	// Output:
	// POST /ops/api/jobs 201 report QUEUED
	// POST /ops/api/jobs/1/cancel 403 forbidden
	// GET /ops/api/jobs/1 200 report QUEUED
	// GET /ops/api/jobs/1 401 unauthorized
}
