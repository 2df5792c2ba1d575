package console

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
)

// The dashboard is HTML rendered on the server from the templates in ui/,
// with one stylesheet and one script, embedded: no build step, nothing
// loaded from elsewhere. The script localises times, refreshes the live
// parts of a page and sends the actions to the API (so that they pass the
// same authorizer, origin check and audit log as any other call).

//go:embed ui
var uiFiles embed.FS

// page is one page of the dashboard.
type page struct {
	// Pattern is the page's path ("/jobs/{id}"); Template names its file
	// under ui/ without ".html".
	Pattern, Template string
	// Nav is the page's item in the navigation bar.
	Nav string
	// load reads what the page shows.
	load func(r *http.Request, acc Access) (pageBody, error)
}

// pageBody is what a page's loader returns: the page's title, its data
// for the template, and how often its live parts refresh (0: never).
type pageBody struct {
	Title  string
	Data   any
	LiveMS int
	// Status is the response's status; 0 is 200.
	Status int
}

// pageView is what the layout template gets.
type pageView struct {
	pageBody
	Nav string
	// Base is the console's root, as the browser sees it, ending in "/":
	// every link and call is relative to it, so that the console works
	// under any prefix.
	Base   string
	Access Access
	// ReadOnly is true when the console has no authorizer.
	ReadOnly bool
	// Alerts is true when the console shows alerts (WithAlerts).
	Alerts bool
	Asset  func(name string) string
}

func (c *console) pages() []page {
	ps := []page{
		{Pattern: "/{$}", Template: "overview", Nav: "overview", load: c.overviewHTML},
		{Pattern: "/jobs", Template: "jobs", Nav: "jobs", load: c.jobsHTML},
		{Pattern: "/jobs/{id}", Template: "job", Nav: "jobs", load: c.jobHTML},
		{Pattern: "/runs", Template: "runs", Nav: "runs", load: c.runsHTML},
		{Pattern: "/runs/{id}", Template: "run", Nav: "runs", load: c.runHTML},
		{Pattern: "/schedules", Template: "schedules", Nav: "schedules", load: c.schedulesHTML},
		{Pattern: "/audit", Template: "audit", Nav: "audit", load: c.auditHTML},
		{Pattern: "/limits", Template: "limits", Nav: "limits", load: c.limitsHTML},
	}
	if c.cfg.alerts != nil {
		ps = append(ps, page{Pattern: "/alerts", Template: "alerts", Nav: "alerts", load: c.alertsHTML})
	}
	return ps
}

// templates parses the pages' templates once per process.
var templates = sync.OnceValues(func() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(uiFiles, "ui/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(uiFiles, "ui/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, name := range names {
		if name == "ui/layout.html" {
			continue
		}
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(uiFiles, name)
		}
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(path.Base(name), ".html")] = t
	}
	return out, nil
})

// assets are the static files, by name, with the version their URLs carry.
type asset struct {
	body    []byte
	version string
	ctype   string
}

var assets = sync.OnceValue(func() map[string]asset {
	out := map[string]asset{}
	entries, _ := fs.ReadDir(uiFiles, "ui/static")
	for _, e := range entries {
		b, err := fs.ReadFile(uiFiles, "ui/static/"+e.Name())
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = asset{body: b, version: hex.EncodeToString(sum[:6]), ctype: mime.TypeByExtension(path.Ext(e.Name()))}
	}
	return out
})

// assetURL is the URL of a static file, relative to the console's root,
// with its version: a new release's files get new URLs, so the old ones
// may be cached for good.
func assetURL(name string) string {
	return "assets/" + name + "?v=" + assets()[name].version
}

// mountPages adds the dashboard's pages and its static files to c.mux.
func (c *console) mountPages() error {
	ts, err := templates()
	if err != nil {
		return errors.New("console: dashboard templates: " + err.Error())
	}
	for _, p := range c.pages() {
		t := ts[p.Template]
		if t == nil {
			return errors.New("console: no template " + p.Template)
		}
		c.mux.Handle("GET "+p.Pattern, c.servePage(p, t))
	}
	c.mux.HandleFunc("GET /assets/{name}", serveAsset)
	return nil
}

// servePage serves a page for callers that may read: the authorizer says
// which actions it shows.
func (c *console) servePage(p page, t *template.Template) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acc := readOnly
		if c.cfg.authorize != nil {
			var err error
			if acc, err = c.cfg.authorize(r); err != nil {
				c.writePageError(w, r, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: err.Error()})
				return
			}
		}
		if !acc.Read {
			c.writePageError(w, r, &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: "the caller may not read"})
			return
		}
		body, err := p.load(r, acc)
		if err != nil {
			c.writePageError(w, r, c.toAPIError(r, err))
			return
		}
		c.render(w, r, t, cmp.Or(body.Status, http.StatusOK), pageView{pageBody: body, Nav: p.Nav, Access: acc})
	})
}

// render writes a page: into a buffer first, so that a template's failure
// is a clean 500 and not half a page.
func (c *console) render(w http.ResponseWriter, r *http.Request, t *template.Template, status int, v pageView) {
	v.Base, v.ReadOnly, v.Asset, v.Alerts = baseOf(r), c.cfg.authorize == nil, assetURL, c.cfg.alerts != nil
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		c.cfg.logger.Error("console: rendering a page", "path", r.URL.Path, "err", err)
		http.Error(w, "internal error; the server's log has it", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	// Only the console's own files, no inline script or style, and no
	// framing by other sites (clickjacking the action buttons).
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the data of the error page.
type errorPage struct {
	Status int
	Err    *apiError
}

// writePageError answers a page's request with an error page.
func (c *console) writePageError(w http.ResponseWriter, r *http.Request, e *apiError) {
	ts, err := templates()
	if err != nil {
		http.Error(w, e.Message, e.Status)
		return
	}
	c.render(w, r, ts["error"], e.Status, pageView{pageBody: pageBody{Title: http.StatusText(e.Status),
		Data: errorPage{Status: e.Status, Err: e}}})
}

// baseOf returns the console's root as the browser sees it: the path the
// request came in on, less what the handler was given (a prefix stripped
// by http.StripPrefix), ending in "/".
func baseOf(r *http.Request) string {
	prefix := ""
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		if full, inner := u.EscapedPath(), r.URL.EscapedPath(); strings.HasSuffix(full, inner) {
			prefix = strings.TrimSuffix(full, inner)
		}
	}
	return prefix + "/"
}

// serveAsset serves a static file; one asked for by its current version
// may be cached for good.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets()[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("v") == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	_, _ = w.Write(a.body)
}
