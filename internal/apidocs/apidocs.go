// Package apidocs serves the API reference at GET /docs: Redoc (vendor/, MIT,
// pinned and updated by update.sh) renders the service's own OpenAPI
// document, /v1/openapi.json, in the browser. The bundle is part of the
// binary: the page loads nothing from elsewhere, and its
// Content-Security-Policy allows nothing else.
package apidocs

import (
	"embed"
	"net/http"
	"strconv"
)

// Path is the reference's page; BundlePath the viewer it loads.
const (
	Path       = "/docs"
	BundlePath = "/docs/redoc.standalone.js"
)

//go:embed docs.html vendor/redoc.standalone.js
var files embed.FS

// csp is the tightest policy under which Redoc 2 works, each source for a reason:
//   - script-src 'self': the bundle, served here; no inline script, no eval.
//   - style-src 'self' 'unsafe-inline': Redoc styles itself with
//     styled-components, which inserts <style> elements at run time (and
//     sets style attributes); without it the page has no layout.
//   - worker-src blob:: the search index runs in a Web Worker that the
//     bundle creates from a blob: URL of its own code.
//   - connect-src 'self': the page fetches /v1/openapi.json.
//   - img-src 'self' data:: icons are inline data: SVGs.
//
// Everything else is 'none'; no form, no framing, no <base>.
const csp = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; worker-src blob:; " +
	"connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the page at Path and the bundle at BundlePath (GET and
// HEAD); the caller routes only those two paths to it.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ctype := "docs.html", "text/html; charset=utf-8"
		if r.URL.Path == BundlePath {
			name, ctype = "vendor/redoc.standalone.js", "text/javascript; charset=utf-8"
		}
		body, _ := files.ReadFile(name) // both are embedded: it cannot fail
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		// Both change only with the binary.
		h.Set("Cache-Control", "public, max-age=300")
		h.Set("Content-Type", ctype)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	})
}
