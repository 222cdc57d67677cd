package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
)

// The OpenAPI validator is built once per test binary: parsing the document
// and compiling its schemas costs far more than validating one exchange.
var (
	oaOnce      sync.Once
	oaValidator validator.Validator
	oaDoc       openAPIDoc
	oaErr       error
)

// openAPIDoc is the little of the document the tests walk themselves.
type openAPIDoc struct {
	Paths map[string]map[string]json.RawMessage `json:"paths"`
}

// openAPIOp is one documented operation: its path template and method.
type openAPIOp struct {
	ID       string
	Template string // as in the document, relative to the server's /v1
	Method   string
	Statuses []string
	Scope    *string
}

func openAPI(t testing.TB) validator.Validator {
	t.Helper()
	oaOnce.Do(func() {
		doc, err := libopenapi.NewDocument(openAPIDocument)
		if err != nil {
			oaErr = fmt.Errorf("parse openapi.json: %w", err)
			return
		}
		v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
		if len(errs) > 0 {
			oaErr = fmt.Errorf("build validator: %v", errs)
			return
		}
		if err := json.Unmarshal(openAPIDocument, &oaDoc); err != nil {
			oaErr = err
			return
		}
		oaValidator = v
	})
	if oaErr != nil {
		t.Fatal(oaErr)
	}
	return oaValidator
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openAPIOps lists the document's operations.
func openAPIOps(t testing.TB) []openAPIOp {
	t.Helper()
	openAPI(t)
	var ops []openAPIOp
	for tmpl, item := range oaDoc.Paths {
		for method, raw := range item {
			if !slices.Contains(httpMethods, method) {
				continue
			}
			var op struct {
				ID        string                     `json:"operationId"`
				Responses map[string]json.RawMessage `json:"responses"`
				Scope     *string                    `json:"x-scope"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			o := openAPIOp{ID: op.ID, Template: tmpl, Method: strings.ToUpper(method), Scope: op.Scope}
			for code := range op.Responses {
				o.Statuses = append(o.Statuses, code)
			}
			slices.Sort(o.Statuses)
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b openAPIOp) int { return strings.Compare(a.ID, b.ID) })
	return ops
}

// matchOp finds the documented operation for a request path under /v1, or
// false when the request is none of them (an unknown path or method).
func matchOp(ops []openAPIOp, method, path string) (openAPIOp, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return openAPIOp{}, false
	}
	got := strings.Split(rest, "/")
	for _, op := range ops {
		if op.Method != method {
			continue
		}
		want := strings.Split(strings.TrimPrefix(op.Template, "/"), "/")
		if len(want) != len(got) {
			continue
		}
		match := true
		for i := range want {
			if got[i] == "" || (!strings.HasPrefix(want[i], "{") && want[i] != got[i]) {
				match = false
				break
			}
		}
		if match {
			return op, true
		}
	}
	return openAPIOp{}, false
}

// seen records every (operation, status) pair validated in this test
// binary, for the coverage test.
var seen = struct {
	sync.Mutex
	pairs map[string]bool
}{pairs: map[string]bool{}}

func sawPair(op string, status int) {
	seen.Lock()
	seen.pairs[op+" "+strconv.Itoa(status)] = true
	seen.Unlock()
}

// unmatchedStatuses are what a /v1 request that is no documented operation
// can get: the checks before routing, then 404.
var unmatchedStatuses = []int{401, 403, 404, 429, 500}

// checkOpenAPI validates one exchange of the HTTP test suite against the
// document: the response always; the request too when the service accepted
// it (tests send invalid requests on purpose, and the service refusing
// them is the point). A request that is no documented operation (an
// unknown path or method) must get an error every /v1 route can give; its
// response is validated as the catch-all's, i.e. as getAgent's errors.
func checkOpenAPI(t testing.TB, hr *http.Request, body string, rec *httptest.ResponseRecorder, now time.Time) {
	t.Helper()
	if hr.URL.Path != "/v1" && !strings.HasPrefix(hr.URL.Path, "/v1/") {
		return // /healthz, /readyz, the console: not part of the API description
	}
	v := openAPI(t)
	fresh := func(method, path string) *http.Request {
		u := *hr.URL
		u.Path = path
		var r *http.Request
		if body != "" {
			r = httptest.NewRequest(method, u.String(), strings.NewReader(body))
		} else {
			r = httptest.NewRequest(method, u.String(), nil)
		}
		r.URL.RawPath = hr.URL.RawPath
		r.Header = hr.Header.Clone()
		return r
	}
	resp := rec.Result()
	defer resp.Body.Close()

	checkRateHeaders(t, hr, rec, now)

	ops := openAPIOps(t)
	op, ok := matchOp(ops, hr.Method, hr.URL.Path)
	if ok && op.ID == "getOpenAPI" && hr.URL.RawQuery != "" {
		ok = false // with a query string it is no endpoint
	}
	if !ok {
		if !slices.Contains(unmatchedStatuses, rec.Code) {
			t.Fatalf("OpenAPI: %s %s is no documented operation, yet got status %d: %s", hr.Method, hr.URL, rec.Code, rec.Body.String())
		}
		sawPair("unmatched", rec.Code)
		proxy := fresh(http.MethodGet, "/v1/ai-agents/agt_unmatched")
		proxy.URL.RawPath = ""
		if valid, errs := v.ValidateHttpResponse(proxy, resp); !valid {
			t.Fatalf("OpenAPI: response to %s %s (no documented operation) does not match the document:\n%s\nbody %s",
				hr.Method, hr.URL, describe(errs), rec.Body.String())
		}
		return
	}
	sawPair(op.ID, rec.Code)
	if !slices.Contains(op.Statuses, strconv.Itoa(rec.Code)) {
		t.Fatalf("OpenAPI: %s (%s %s) answered %d, which the document does not list (%v): %s",
			op.ID, hr.Method, hr.URL, rec.Code, op.Statuses, rec.Body.String())
	}
	req := fresh(hr.Method, hr.URL.Path)
	if valid, errs := v.ValidateHttpResponse(req, resp); !valid {
		t.Fatalf("OpenAPI: response of %s (%s %s) does not match the document:\n%s\nbody %s",
			op.ID, hr.Method, hr.URL, describe(errs), rec.Body.String())
	}
	if rec.Code >= 200 && rec.Code < 300 {
		req := fresh(hr.Method, hr.URL.Path)
		if valid, errs := v.ValidateHttpRequestSync(req); !valid {
			// limit is documented as 1..100 (what a client should send)
			// while the service tolerates anything there: larger values
			// clamp, others fall back to 30.
			errs = slices.DeleteFunc(errs, func(e *liberrors.ValidationError) bool { return e.ParameterName == "limit" })
			if len(errs) > 0 {
				t.Fatalf("OpenAPI: %s %s was accepted (%d) but the document says the request is invalid:\n%s\nbody %q",
					hr.Method, hr.URL, rec.Code, describe(errs), body)
			}
		}
	}
}

// checkRateHeaders asserts that the IETF RateLimit and RateLimit-Policy
// fields agree with the contract's X-RateLimit-* on every response that
// carries them, and that they come together or not at all.
func checkRateHeaders(t testing.TB, hr *http.Request, rec *httptest.ResponseRecorder, now time.Time) {
	t.Helper()
	h := rec.Header()
	names := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"}
	present := 0
	for _, n := range names {
		if len(h.Values(n)) > 1 {
			t.Fatalf("%s %s: %s sent twice", hr.Method, hr.URL, n)
		}
		if h.Get(n) != "" {
			present++
		}
	}
	if present == 0 {
		return
	}
	if present != len(names) {
		t.Fatalf("%s %s: only some rate-limit fields: %v", hr.Method, hr.URL, h)
	}
	limit, remaining, reset := h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")
	resetUnix, err := strconv.ParseInt(reset, 10, 64)
	if err != nil {
		t.Fatalf("%s %s: X-RateLimit-Reset %q", hr.Method, hr.URL, reset)
	}
	policy, _, _ := strings.Cut(h.Get("RateLimit-Policy"), ";")
	if policy != `"per-key"` && policy != `"per-address"` {
		t.Fatalf("%s %s: RateLimit-Policy %q", hr.Method, hr.URL, h.Get("RateLimit-Policy"))
	}
	wantPolicy := policy + ";q=" + limit + ";w=60"
	wantRate := policy + ";r=" + remaining + ";t=" + strconv.FormatInt(max(resetUnix-now.Unix(), 0), 10)
	if got := h.Get("RateLimit-Policy"); got != wantPolicy {
		t.Fatalf("%s %s: RateLimit-Policy %q disagrees with X-RateLimit-Limit %s (want %q)", hr.Method, hr.URL, got, limit, wantPolicy)
	}
	if got := h.Get("RateLimit"); got != wantRate {
		t.Fatalf("%s %s: RateLimit %q disagrees with X-RateLimit-Remaining %s, X-RateLimit-Reset %s (want %q)",
			hr.Method, hr.URL, got, remaining, reset, wantRate)
	}
	if rec.Code == http.StatusTooManyRequests {
		if remaining != "0" && policy == `"per-key"` {
			t.Fatalf("%s %s: 429 with X-RateLimit-Remaining %s", hr.Method, hr.URL, remaining)
		}
		if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("%s %s: 429 with Retry-After %q", hr.Method, hr.URL, h.Get("Retry-After"))
		}
	} else if h.Get("Retry-After") != "" {
		t.Fatalf("%s %s: Retry-After on a %d", hr.Method, hr.URL, rec.Code)
	}
}

func describe(errs []*liberrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %s: %s", e.Message, e.Reason)
		for _, s := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s (at %s, %s)", s.Reason, s.FieldPath, s.KeywordLocation)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestOpenAPIDocument validates the document against the OpenAPI 3.1
// meta-schema and checks it against the code: every route of routes.go
// with its scope, every error code with its status.
func TestOpenAPIDocument(t *testing.T) {
	v := openAPI(t)
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document:\n%s", describe(errs))
	}
}
