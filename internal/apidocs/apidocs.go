// Package apidocs renders the API reference served at GET /docs: a plain
// HTML page the service builds from its own OpenAPI document at start-up
// (operations grouped by tag, their parameters, bodies, responses with
// their error codes and examples, and the schemas), styled by the console's
// stylesheet and one of its own. It loads nothing from elsewhere and runs no
// script; its Content-Security-Policy allows only this origin's styles.
package apidocs

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
)

// Path is where the reference is served; StylePath its stylesheet.
const (
	Path      = "/docs"
	StylePath = "/docs/docs.css"
)

//go:embed docs.html docs.css
var files embed.FS

var page = template.Must(template.New("docs.html").ParseFS(files, "docs.html"))

// Handler serves the rendered reference and its stylesheet.
type Handler struct {
	html, css []byte
}

// New renders openAPI (an OpenAPI 3.1 JSON document) once; it fails on a document it
// cannot read or whose $refs it cannot resolve.
func New(openAPI []byte) (*Handler, error) {
	var doc document
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		return nil, fmt.Errorf("apidocs: read OpenAPI document: %w", err)
	}
	v, err := build(&doc)
	if err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return nil, fmt.Errorf("apidocs: render: %w", err)
	}
	css, err := files.ReadFile("docs.css")
	if err != nil {
		return nil, err
	}
	return &Handler{html: b.Bytes(), css: css}, nil
}

// ServeHTTP answers GET and HEAD of Path and StylePath; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	var ctype string
	switch r.URL.Path {
	case Path:
		body, ctype = h.html, "text/html; charset=utf-8"
	case StylePath:
		body, ctype = h.css, "text/css; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method not allowed.", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; "+
		"form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	// The page changes only with the binary.
	hd.Set("Cache-Control", "public, max-age=300")
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
