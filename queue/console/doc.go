// Package console serves an operations API for a queue over HTTP: jobs
// listed, inspected, submitted, cancelled and retried; runs and their
// morning reviews; schedules and their next ticks; counts and health. It
// speaks JSON under /api/, and describes itself at /api/openapi.json.
//
// New returns an http.Handler that starts no goroutines and can be mounted
// under any prefix with http.StripPrefix:
//
//	h, err := console.New(client, console.WithAuthorizer(authorize))
//	mux.Handle("/ops/", http.StripPrefix("/ops", h))
//
// # Access
//
// Every request goes through the authorizer (WithAuthorizer), which says
// what its caller may read and do. Without one, the console is read-only:
// every request that would change something is refused with 403.
// Requests that change state are also refused when a browser sends them
// from another origin (http.CrossOriginProtection), and their JSON bodies
// are limited to 1 MiB and may hold no field the endpoint does not know.
//
// # Errors
//
// Errors are JSON, {"error":{"code":"…","message":"…"}}, with the HTTP
// status that fits: the queue's typed errors map to codes such as
// unknown_kind and invalid_payload (422), invalid_option (400), not_found
// (404) and wrong_status (409). A query parameter that cannot be read is
// invalid_param (400), and the error names it in "param".
package console
