package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
)

// GET /docs needs no key: it is the API reference, a page that loads the
// viewer (internal/apidocs) under a strict CSP; other methods are the API's
// 404, and so is any other path under /docs.
func TestDocsNeedNoKey(t *testing.T) {
	f := newFixture(t, store.EngineSQLite)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, httptest.NewRequest(method, "http://api.test/docs", nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
			!strings.HasPrefix(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("%s /docs: %d %v", method, rec.Code, rec.Header())
		}
		if method == http.MethodGet && !strings.Contains(rec.Body.String(), `src="/docs/redoc.standalone.js"`) {
			t.Fatal("GET /docs does not load the viewer")
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test/docs/redoc.standalone.js", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("GET /docs/redoc.standalone.js: %d", rec.Code)
	}
	f.get("/docs/docs.css", "").wantError(t, http.StatusNotFound, "not_found")
	f.send(http.MethodPost, "/docs", "", "").wantError(t, http.StatusNotFound, "not_found")
}
