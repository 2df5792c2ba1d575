package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sheaf-dev/sheaf/queue/console"
)

func runServe(ctx context.Context, e *env, args []string) error {
	fs, dsn := e.flags("serve", "[flags]", `Serves the console, the operations API under /api/ and the dashboard under /,
until interrupted. It is read-only unless $`+consoleToken+` is set: then a request
that carries it as "Authorization: Bearer <token>" may also submit, cancel,
retry and pause, recorded in the audit log as "token"; others may only read.`)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	origins := fs.String("trusted-origins", "", "origins, comma-separated, whose browsers may make changes (besides the console's own)")
	if err := e.parseNone(fs, args); err != nil {
		return err
	}
	client, _, closeDB, err := e.open(ctx, *dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	opts := []console.Option{console.WithLogger(log)}
	if o := splitList(*origins); len(o) > 0 {
		opts = append(opts, console.WithTrustedOrigins(o...))
	}
	token := e.getenv(consoleToken)
	if token != "" {
		opts = append(opts, console.WithAuthorizer(bearer(token)))
	}
	h, err := console.New(client, opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mode := "read-only ($" + consoleToken + " not set)"
	if token != "" {
		mode = "changes allowed with the token"
	}
	fmt.Fprintf(e.stdout, "sheaf console on http://%s/, %s\n", ln.Addr(), mode)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(stop)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// bearer lets a request with the token do everything, and others read.
func bearer(token string) console.Authorizer {
	return func(r *http.Request) (console.Access, error) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return console.Access{Read: true, Submit: true, Cancel: true, Retry: true, Pause: true, Silence: true, Actor: "token"}, nil
		}
		return console.Access{Read: true}, nil
	}
}
