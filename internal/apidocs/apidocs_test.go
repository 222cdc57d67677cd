package apidocs_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/apidocs"
)

func get(t *testing.T, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	apidocs.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s %s: %d", method, path, rec.Code)
	}
	return rec
}

// The page loads the viewer from this origin only, under a policy that
// allows nothing from elsewhere, and points it at the service's document.
func TestPageLoadsOnlyItself(t *testing.T) {
	rec := get(t, http.MethodGet, apidocs.Path)
	h := rec.Header()
	if h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("headers %v", h)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self';", "worker-src blob:;", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "http") || strings.Contains(csp, "*") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows another origin or eval", csp)
	}
	body := rec.Body.String()
	if !strings.Contains(body, `<script src="`+apidocs.BundlePath+`"></script>`) || !strings.Contains(body, `spec-url="/v1/openapi.json"`) {
		t.Fatalf("the page does not load the bundle or the document:\n%s", body)
	}
	if src := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindString(body); src != "" {
		t.Errorf("the page loads something from elsewhere: %s", src)
	}
	if head := get(t, http.MethodHead, apidocs.Path); head.Body.Len() != 0 || head.Header().Get("Content-Length") != h.Get("Content-Length") {
		t.Errorf("HEAD: %d bytes, Content-Length %q", head.Body.Len(), head.Header().Get("Content-Length"))
	}
}

// The bundle served is the vendored one, byte for byte, embedded in the
// binary: the test reads vendor/ only to compare.
func TestBundleIsEmbedded(t *testing.T) {
	want, err := os.ReadFile("vendor/redoc.standalone.js")
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile("vendor/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, http.MethodGet, apidocs.BundlePath)
	if !bytes.Equal(rec.Body.Bytes(), want) || len(want) < 500_000 {
		t.Fatalf("served %d bytes, vendor/ holds %d", rec.Body.Len(), len(want))
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(version)), "redoc ")
	if !bytes.Contains(want, []byte(`Version: ","`+v+`"`)) {
		t.Errorf("vendor/VERSION says %s; the bundle's header does not", v)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if _, err := os.Stat("vendor/LICENSE"); err != nil {
		t.Errorf("the viewer's licence is not kept beside it: %v", err)
	}
}
