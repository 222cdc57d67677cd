package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestRequestLabels(t *testing.T) {
	m := New()
	m.Request("GET /v1/me", "GET", 200, 3*time.Millisecond)
	m.Request("GET /v1/me", "GET", 429, time.Millisecond)
	out := scrape(t, m)
	for _, want := range []string{
		`agentapi_http_requests_total{method="GET",route="GET /v1/me",status="200"} 1`,
		`agentapi_http_requests_total{method="GET",route="GET /v1/me",status="429"} 1`,
		`agentapi_http_request_duration_seconds_count{method="GET",route="GET /v1/me",status="200"} 1`,
		`agentapi_http_request_duration_seconds_bucket{method="GET",route="GET /v1/me",status="200",le="0.005"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
}

// Any token is a valid HTTP method; a client sending a new one on every
// request must not create a new series each time.
func TestMethodsAreABoundedSet(t *testing.T) {
	m := New()
	for i := range 100 {
		m.Request("unmatched", "X"+strings.Repeat("Y", i), 404, time.Millisecond)
	}
	m.Request("unmatched", "PATCH", 404, time.Millisecond)
	out := scrape(t, m)
	if !strings.Contains(out, `agentapi_http_requests_total{method="OTHER",route="unmatched",status="404"} 100`) {
		t.Fatalf("invented methods not folded into OTHER:\n%s", grep(out, "requests_total"))
	}
	if !strings.Contains(out, `method="PATCH"`) {
		t.Fatal("a real method lost its label")
	}
	if n := strings.Count(out, "agentapi_http_requests_total{"); n != 2 {
		t.Fatalf("%d request series, want 2", n)
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	m.Request("r", "GET", 200, time.Millisecond)
	m.RateLimited("key")
	m.AuthFailure("unknown")
	m.Store("op", time.Millisecond)
	m.Register(nil)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
