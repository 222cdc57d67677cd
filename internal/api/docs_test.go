package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
)

// GET /docs needs no key: it is the API reference rendered from
// openapi.json, HTML under a strict CSP; other methods are the API's 404.
func TestDocsNeedNoKey(t *testing.T) {
	f := newFixture(t, store.EngineSQLite)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, httptest.NewRequest(method, "http://api.test/docs", nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
			!strings.HasPrefix(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("%s /docs: %d %v", method, rec.Code, rec.Header())
		}
		if method == http.MethodGet && !strings.Contains(rec.Body.String(), `id="op-getMe"`) {
			t.Fatal("GET /docs does not show GET /me")
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test/docs/docs.css", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("GET /docs/docs.css: %d", rec.Code)
	}
	f.send(http.MethodPost, "/docs", "", "").wantError(t, http.StatusNotFound, "not_found")
}
