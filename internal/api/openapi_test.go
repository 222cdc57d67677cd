package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/wire"

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
	oaOps       []openAPIOp
	oaErr       error
)

// openAPIDoc is the little of the document the tests walk themselves.
type openAPIDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Responses map[string]openAPIResponse `json:"responses"`
	} `json:"components"`
}

// openAPIResponse is a response object (or a reference to one) and the
// error codes it lists in x-error-codes.
type openAPIResponse struct {
	Ref        string   `json:"$ref"`
	ErrorCodes []string `json:"x-error-codes"`
}

// openAPIOp is one documented operation: its path template and method.
type openAPIOp struct {
	ID       string
	Template string // as in the document, relative to the server's /v1
	Method   string
	Statuses []string
	Scope    *string
	Security []map[string][]string
	// ErrorCodes are the codes each error status may carry (x-error-codes).
	ErrorCodes map[string][]string
	Desc       string
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// loadOpenAPI builds the validator and the list of operations, once.
func loadOpenAPI() (validator.Validator, []openAPIOp, error) {
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
		for tmpl, item := range oaDoc.Paths {
			for method, raw := range item {
				if !slices.Contains(httpMethods, method) {
					continue
				}
				o, err := loadOpenAPIOp(tmpl, method, raw)
				if err != nil {
					oaErr = err
					return
				}
				oaOps = append(oaOps, o)
			}
		}
		slices.SortFunc(oaOps, func(a, b openAPIOp) int { return strings.Compare(a.ID, b.ID) })
		oaValidator = v
	})
	return oaValidator, oaOps, oaErr
}

// loadOpenAPIOp reads one operation of the document (oaDoc, for the
// shared responses its own refer to): its statuses, sorted, and the error
// codes each may carry.
func loadOpenAPIOp(tmpl, method string, raw json.RawMessage) (openAPIOp, error) {
	var op struct {
		ID          string                     `json:"operationId"`
		Description string                     `json:"description"`
		Responses   map[string]openAPIResponse `json:"responses"`
		Scope       *string                    `json:"x-scope"`
		Security    []map[string][]string      `json:"security"`
	}
	if err := json.Unmarshal(raw, &op); err != nil {
		return openAPIOp{}, err
	}
	o := openAPIOp{ID: op.ID, Template: tmpl, Method: strings.ToUpper(method), Scope: op.Scope, Security: op.Security,
		Desc: op.Description, ErrorCodes: map[string][]string{}}
	for code, resp := range op.Responses {
		o.Statuses = append(o.Statuses, code)
		if name, ok := strings.CutPrefix(resp.Ref, "#/components/responses/"); ok {
			resp = oaDoc.Components.Responses[name]
		}
		if resp.ErrorCodes != nil {
			o.ErrorCodes[code] = resp.ErrorCodes
		}
	}
	slices.Sort(o.Statuses)
	return o, nil
}

func openAPI(t testing.TB) validator.Validator {
	t.Helper()
	v, _, err := loadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// openAPIOps lists the document's operations.
func openAPIOps(t testing.TB) []openAPIOp {
	t.Helper()
	_, ops, err := loadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
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

// oaChecked counts the exchanges validated, for the record.
var oaChecked atomic.Int64

func sawPair(op string, status int) {
	seen.Lock()
	seen.pairs[op+" "+strconv.Itoa(status)] = true
	seen.Unlock()
}

// unmatchedStatuses are what a /v1 request that is no documented operation
// can get: the checks before routing, then 404.
var unmatchedStatuses = []int{401, 403, 404, 429, 500}

// exchange is one request and the response the handler gave it.
type exchange struct {
	req    *http.Request // its body is not read; body holds what the handler read of it
	body   string
	status int
	header http.Header
	resp   []byte
	// The service's clock before and after the request (equal on a test
	// clock): RateLimit's t is X-RateLimit-Reset minus the time in between.
	before, now time.Time
}

func recorded(hr *http.Request, body string, rec *httptest.ResponseRecorder, now time.Time) exchange {
	return exchange{req: hr, body: body, status: rec.Code, header: rec.Result().Header, resp: rec.Body.Bytes(), before: now, now: now}
}

// openAPIChecked wraps the handler under test so that every exchange of the
// suite (through f.do, a test server, raw TCP, FuzzOpenAPI) is validated
// against the document, so it cannot drift from the code.
func openAPIChecked(t testing.TB, h http.Handler, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(r.Body, &body), r.Body}
		}
		tw := &teeWriter{ResponseWriter: w}
		before := now()
		h.ServeHTTP(tw, r)
		if tw.header == nil { // nothing written: net/http sends 200 and the headers
			tw.status, tw.header = http.StatusOK, w.Header().Clone()
		}
		x := exchange{req: r, body: body.String(), status: tw.status, header: tw.header, resp: tw.buf.Bytes(), before: before, now: now()}
		if p := openAPIProblem(x); p != "" {
			t.Errorf("%s", p) // Errorf: this may run on a server's goroutine
		}
	})
}

// teeWriter passes a response through and keeps a copy of it.
type teeWriter struct {
	http.ResponseWriter
	status int
	header http.Header
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if w.header == nil {
		w.status, w.header = code, w.ResponseWriter.Header().Clone()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	if w.header == nil {
		w.status, w.header = http.StatusOK, w.ResponseWriter.Header().Clone()
	}
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// openAPIProblem validates one exchange against the document and returns
// what is wrong, or "". The response always; the request too when the
// service accepted it (tests send invalid requests on purpose, and the
// service refusing them is the point). A request that is no documented
// operation (an unknown path or method) must get an error every /v1 route
// can give; its response is validated as the catch-all's, i.e. against the
// shared error responses (through getAgent, which has them all).
func openAPIProblem(x exchange) string {
	hr := x.req
	if hr.URL.Path != "/v1" && !strings.HasPrefix(hr.URL.Path, "/v1/") {
		return "" // /healthz, /readyz, the console: not part of the API description
	}
	v, ops, err := loadOpenAPI()
	if err != nil {
		return err.Error()
	}
	oaChecked.Add(1)
	where := hr.Method + " " + hr.URL.String()
	if p := rateHeadersProblem(x); p != "" {
		return where + ": " + p
	}
	preflight := isPreflight(hr) && x.status == http.StatusNoContent
	if p := corsProblem(x.header, preflight); p != "" {
		return where + ": " + p
	}
	if preflight {
		return "" // the CORS protocol, no operation of the API (cors_test.go)
	}
	op, ok := matchOp(ops, hr.Method, hr.URL.Path)
	if ok && strings.HasSuffix(op.Template, "/openapi.json") && hr.URL.RawQuery != "" {
		ok = false // with a query string it is no endpoint
	}
	if !ok {
		return openAPIProblemUnmatched(v, ops, x, where)
	}
	sawPair(op.ID, x.status)
	if !slices.Contains(op.Statuses, strconv.Itoa(x.status)) {
		return fmt.Sprintf("OpenAPI: %s (%s) answered %d, which the document does not list (%v): %s", op.ID, where, x.status, op.Statuses, x.resp)
	}
	req := openAPIProblemRequest(x, hr.Method, hr.URL.Path)
	if valid, errs := v.ValidateHttpResponse(req, openAPIProblemResponse(x, req)); !valid {
		return fmt.Sprintf("OpenAPI: response of %s (%s) does not match the document:\n%s\nbody %s", op.ID, where, describe(errs), x.resp)
	}
	if p := bodyRuleProblem(op, x); p != "" {
		return fmt.Sprintf("OpenAPI: response of %s (%s) does not match the document: %s\nbody %s", op.ID, where, p, x.resp)
	}
	if p := sseProblem(op, x); p != "" {
		return fmt.Sprintf("OpenAPI: event stream of %s (%s) does not match the document: %s\nbody %s", op.ID, where, p, x.resp)
	}
	if x.status >= 200 && x.status < 300 {
		if valid, errs := v.ValidateHttpRequestSync(openAPIProblemRequest(x, hr.Method, hr.URL.Path)); !valid {
			return fmt.Sprintf("OpenAPI: %s was accepted (%d) but the document says the request is invalid:\n%s\nbody %q", where, x.status, describe(errs), x.body)
		}
	}
	return clientShapeProblem(ops, x, where)
}

// openAPIProblemRequest is the exchange's request as the validator takes
// it: to api.test, at path, with the body the handler read.
func openAPIProblemRequest(x exchange, method, path string) *http.Request {
	hr := x.req
	// Built by hand: a fuzzed query need not survive url.Parse.
	u := *hr.URL
	u.Scheme, u.Host, u.Path, u.RawPath = "http", "api.test", path, ""
	r := (&http.Request{Method: method, URL: &u, Host: u.Host, Header: hr.Header.Clone(),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody}).WithContext(context.Background())
	if x.body != "" {
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(x.body)), int64(len(x.body))
	}
	return r
}

// openAPIProblemResponse is the exchange's response, as the answer to req.
func openAPIProblemResponse(x exchange, req *http.Request) *http.Response {
	return &http.Response{StatusCode: x.status, Header: x.header, Request: req,
		Body: io.NopCloser(bytes.NewReader(x.resp)), ContentLength: int64(len(x.resp))}
}

// openAPIProblemUnmatched checks the answer to a request that is no
// documented operation: a status every /v1 route can give, and a response
// valid as the catch-all's, through getAgent.
func openAPIProblemUnmatched(v validator.Validator, ops []openAPIOp, x exchange, where string) string {
	if !slices.Contains(unmatchedStatuses, x.status) {
		return fmt.Sprintf("OpenAPI: %s is no documented operation, yet got status %d: %s", where, x.status, x.resp)
	}
	sawPair("unmatched", x.status)
	proxy := openAPIProblemRequest(x, http.MethodGet, "/v1/ai-agents/agt_unmatched")
	if valid, errs := v.ValidateHttpResponse(proxy, openAPIProblemResponse(x, proxy)); !valid {
		return fmt.Sprintf("OpenAPI: response to %s (no documented operation) does not match the document:\n%s\nbody %s", where, describe(errs), x.resp)
	}
	getAgent, _ := matchOp(ops, http.MethodGet, proxy.URL.Path)
	if p := bodyRuleProblem(getAgent, x); p != "" {
		return fmt.Sprintf("OpenAPI: response to %s (no documented operation) does not match the document: %s\nbody %s", where, p, x.resp)
	}
	return clientShapeProblem(ops, x, where)
}

// bodyRuleProblem checks what the document states in words and extensions
// rather than in its schemas (conditional schemas trip the tools that read
// it: code generators ignore them, Redocly's example check misreads them):
// an error response carries one of its x-error-codes, existing_id comes
// only with duplicate_value, and a page's meta.next is null exactly when
// meta.has_more is false.
func bodyRuleProblem(op openAPIOp, x exchange) string {
	if codes, ok := op.ErrorCodes[strconv.Itoa(x.status)]; ok && len(x.resp) > 0 {
		var body struct {
			Error struct {
				Code       string  `json:"code"`
				ExistingID *string `json:"existing_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal(x.resp, &body); err != nil {
			return "the error body is not JSON: " + err.Error()
		}
		if !slices.Contains(codes, body.Error.Code) {
			return fmt.Sprintf("error.code %q is not among the x-error-codes %v of its %d response", body.Error.Code, codes, x.status)
		}
		if body.Error.ExistingID != nil && body.Error.Code != string(domain.CodeDuplicateValue) {
			return fmt.Sprintf("existing_id on %s, which only duplicate_value carries", body.Error.Code)
		}
	}
	if op.ID == "listAgents" && x.status == http.StatusOK {
		var page struct {
			Meta struct {
				Next    *string `json:"next"`
				HasMore bool    `json:"has_more"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(x.resp, &page); err != nil {
			return "the page is not JSON: " + err.Error()
		}
		if page.Meta.HasMore != (page.Meta.Next != nil) {
			return fmt.Sprintf("meta.has_more %v with meta.next %v: next is null exactly when has_more is false", page.Meta.HasMore, page.Meta.Next)
		}
	}
	return ""
}

// rateHeadersProblem checks that the IETF RateLimit and RateLimit-Policy
// fields agree with the contract's X-RateLimit-* on every response that
// carries them, and that they come together or not at all.
func rateHeadersProblem(x exchange) string {
	h := x.header
	names := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"}
	present := 0
	for _, n := range names {
		if len(h.Values(n)) > 1 {
			return n + " sent twice"
		}
		if h.Get(n) != "" {
			present++
		}
	}
	if present == 0 {
		return ""
	}
	if present != len(names) {
		return fmt.Sprintf("only some rate-limit fields: %v", h)
	}
	limit, remaining, reset := h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")
	resetUnix, err := strconv.ParseInt(reset, 10, 64)
	if err != nil {
		return fmt.Sprintf("X-RateLimit-Reset %q", reset)
	}
	policy, _, _ := strings.Cut(h.Get("RateLimit-Policy"), ";")
	if policy != `"per-key"` && policy != `"per-address"` {
		return fmt.Sprintf("RateLimit-Policy %q", h.Get("RateLimit-Policy"))
	}
	wantPolicy := policy + ";q=" + limit + ";w=60"
	if got := h.Get("RateLimit-Policy"); got != wantPolicy {
		return fmt.Sprintf("RateLimit-Policy %q disagrees with X-RateLimit-Limit %s (want %q)", got, limit, wantPolicy)
	}
	got := h.Get("RateLimit")
	if !rateHeadersProblemAgree(x, got, policy, remaining, resetUnix) {
		return fmt.Sprintf("RateLimit %q disagrees with X-RateLimit-Remaining %s, X-RateLimit-Reset %s at %d", got, remaining, reset, x.now.Unix())
	}
	return rateHeadersProblemRetry(x, policy, remaining)
}

// rateHeadersProblemAgree reports whether the RateLimit field got says
// what X-RateLimit-Remaining and X-RateLimit-Reset say, at some second of
// the exchange (t is the reset minus the time then).
func rateHeadersProblemAgree(x exchange, got, policy, remaining string, resetUnix int64) bool {
	for at := x.before.Unix(); at <= x.now.Unix(); at++ {
		if got == policy+";r="+remaining+";t="+strconv.FormatInt(max(resetUnix-at, 0), 10) {
			return true
		}
	}
	return false
}

// rateHeadersProblemRetry checks Retry-After: on a 429 (with nothing
// remaining, unless it refuses one question too many in progress), and
// only there.
func rateHeadersProblemRetry(x exchange, policy, remaining string) string {
	h := x.header
	if x.status == http.StatusTooManyRequests {
		if remaining != "0" && policy == `"per-key"` && !strings.Contains(string(x.resp), "questions in progress") {
			return "429 with X-RateLimit-Remaining " + remaining
		}
		if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
			return fmt.Sprintf("429 with Retry-After %q", h.Get("Retry-After"))
		}
	} else if h.Get("Retry-After") != "" {
		return fmt.Sprintf("Retry-After on a %d", x.status)
	}
	return ""
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

// TestOpenAPIMatchesCode checks the document against the code it
// describes: every route of routes.go (and no other) with its one scope,
// the scope vocabulary, every error code under the status statusOf gives
// it, and the limits the validation code enforces.
func TestOpenAPIMatchesCode(t *testing.T) {
	ops := openAPIOps(t)

	routes := openAPIMatchesCodeRoutes(t)
	documented := map[string]bool{}
	for _, op := range ops {
		key := op.Method + " " + op.Template
		documented[key] = true
		openAPIMatchesCodeCheckOp(t, op, key, routes)
	}
	for key := range routes {
		if !documented[key] {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}

	d := &openAPIMatchesCodeDoc{t: t}
	if err := json.Unmarshal(openAPIDocument, &d.doc); err != nil {
		t.Fatal(err)
	}
	openAPIMatchesCodeEnums(t, d)
	// Each error response lists exactly the codes statusOf maps to its
	// status, and uses Error (ConflictError for 409, the only one with
	// existing_id) without allOf, which code generators mishandle.
	byStatus := map[string]string{
		"400": "BadRequest", "401": "Unauthorized", "403": "Forbidden", "404": "NotFound", "409": "Conflict",
		"413": "PayloadTooLarge", "415": "UnsupportedMediaType", "429": "TooManyRequests", "500": "ServerError",
	}
	for status, name := range byStatus {
		openAPIMatchesCodeErrorResponse(t, d, ops, status, name)
	}
	openAPIMatchesCodeLimits(t, d)
}

// openAPIMatchesCodeRoutes reads routes.go's routes, with the scope each
// requires ("none" for none), and the document's own, served before
// routing, in server.go.
func openAPIMatchesCodeRoutes(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	scopeOf := map[string]string{"read": string(domain.ScopeAgentsRead), "write": string(domain.ScopeAgentsWrite),
		"query": string(domain.ScopeAgentsQuery), "manage": string(domain.ScopeWebhooksManage)}
	routeRE := regexp.MustCompile(`mux\.Handle\("([A-Z]+) /v1(/[^"]*)", s\.serve\((s\.scoped\((\w+), )?`)
	// Webhook endpoint routes go through ep, which is s.serve(s.scoped(manage, …)).
	if !strings.Contains(string(src), "ep := func(h handlerFunc) http.Handler { return s.serve(s.scoped(manage, ") {
		t.Fatal("routes.go's ep no longer requires webhooks:manage; update this test")
	}
	src = regexp.MustCompile(`mux\.Handle\(("[A-Z]+ /v1/[^"]*"), ep\(`).ReplaceAll(src, []byte(`mux.Handle($1, s.serve(s.scoped(manage, `))
	// The document is served before routing, in server.go.
	routes := map[string]string{"GET /openapi.json": "none", "HEAD /openapi.json": "none"}
	for _, m := range routeRE.FindAllStringSubmatch(string(src), -1) {
		scope := "none"
		if m[4] != "" {
			scope = scopeOf[m[4]]
		}
		routes[m[1]+" "+m[2]] = scope
	}
	if len(routes) < 9 {
		t.Fatalf("found only %d routes in routes.go: %v", len(routes), routes)
	}
	return routes
}

// openAPIMatchesCodeCheckOp checks one documented operation against its
// route: routed, named, with the security requirement and the scope
// routes.go gives it.
func openAPIMatchesCodeCheckOp(t *testing.T, op openAPIOp, key string, routes map[string]string) {
	t.Helper()
	scope, ok := routes[key]
	if !ok {
		t.Errorf("%s (%s) is documented but not routed", op.ID, key)
		return
	}
	if op.ID == "" {
		t.Errorf("%s has no operationId", key)
	}
	// The http bearer scheme has no scopes in OpenAPI terms: the
	// requirement lists none, x-scope and the description name it.
	want := []map[string][]string{{"bearerAuth": {}}}
	if strings.HasSuffix(key, " /openapi.json") {
		want = []map[string][]string{}
	}
	if fmt.Sprint(op.Security) != fmt.Sprint(want) || op.Security == nil || len(op.Security) == 1 && op.Security[0]["bearerAuth"] == nil {
		t.Errorf("%s: security %v, want %v", op.ID, op.Security, want)
	}
	if scope != "none" && !strings.Contains(op.Desc, "Scope: `"+scope+"`.") {
		t.Errorf("%s: the description does not say \"Scope: `%s`.\": %q", op.ID, scope, op.Desc)
	}
	gotScope := "none"
	if op.Scope != nil {
		gotScope = *op.Scope
	}
	if gotScope != scope {
		t.Errorf("%s: x-scope %q, routes.go requires %q", op.ID, gotScope, scope)
	}
}

// openAPIMatchesCodeDoc is the document as TestOpenAPIMatchesCode walks it.
type openAPIMatchesCodeDoc struct {
	t   *testing.T
	doc map[string]any
}

// at is the value at a path of keys (and indexes) in the document; none
// is fatal.
func (d *openAPIMatchesCodeDoc) at(path ...string) any {
	d.t.Helper()
	var v any = d.doc
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, _ := strconv.Atoi(p)
			v = x[i]
		default:
			d.t.Fatalf("no %v in openapi.json", path)
		}
	}
	return v
}

// openAPIMatchesCodeStrs is a list of strings of the document, sorted.
func openAPIMatchesCodeStrs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	slices.Sort(out)
	return out
}

// openAPIMatchesCodeEnums checks the ErrorCode and Scope enums against the
// contract's codes and the scope vocabulary.
func openAPIMatchesCodeEnums(t *testing.T, d *openAPIMatchesCodeDoc) {
	t.Helper()
	var codes, scopes []string
	for _, c := range domain.Codes {
		codes = append(codes, string(c))
	}
	for _, s := range domain.Scopes {
		scopes = append(scopes, string(s))
	}
	slices.Sort(codes)
	slices.Sort(scopes)
	if got := openAPIMatchesCodeStrs(d.at("components", "schemas", "ErrorCode", "enum")); !slices.Equal(got, codes) {
		t.Errorf("ErrorCode enum %v, the contract's codes %v", got, codes)
	}
	if got := openAPIMatchesCodeStrs(d.at("components", "schemas", "Scope", "enum")); !slices.Equal(got, scopes) {
		t.Errorf("Scope enum %v, the vocabulary %v", got, scopes)
	}
}

// openAPIMatchesCodeErrorResponse checks one shared error response: its
// schema, its x-error-codes against statusOf, and that every operation
// with its status refers to it.
func openAPIMatchesCodeErrorResponse(t *testing.T, d *openAPIMatchesCodeDoc, ops []openAPIOp, status, name string) {
	t.Helper()
	allowed := openAPIMatchesCodeStrs(d.at("components", "responses", name, "x-error-codes"))
	wantSchema := "#/components/schemas/Error"
	if status == "409" {
		wantSchema = "#/components/schemas/ConflictError"
	}
	if got := d.at("components", "responses", name, "content", "application/json", "schema").(map[string]any); len(got) != 1 || got["$ref"] != wantSchema {
		t.Errorf("response %s (%s): schema %v, want only {$ref: %s}", name, status, got, wantSchema)
	}
	var want []string
	for _, c := range domain.Codes {
		if strconv.Itoa(statusOf(c)) == status {
			want = append(want, string(c))
		}
	}
	slices.Sort(want)
	if !slices.Equal(allowed, want) {
		t.Errorf("response %s (%s) allows codes %v; statusOf gives that status to %v", name, status, allowed, want)
	}
	for _, op := range ops {
		if !slices.Contains(op.Statuses, status) {
			continue
		}
		ref := d.at("paths", op.Template, strings.ToLower(op.Method), "responses", status, "$ref")
		if ref != "#/components/responses/"+name {
			t.Errorf("%s %s: response %v, want the shared %s", op.ID, status, ref, name)
		}
	}
}

// openAPIMatchesCodeLimits checks the limits the validation code enforces,
// and limit's default and rule in words.
func openAPIMatchesCodeLimits(t *testing.T, d *openAPIMatchesCodeDoc) {
	t.Helper()
	// The limits the validation code enforces.
	for _, c := range []struct {
		path []string
		want float64
	}{
		{[]string{"components", "schemas", "CollectionMeta", "properties", "limit", "maximum"}, MaxPageSize},
		{[]string{"paths", "/ai-agents", "get", "responses", "200", "content", "application/json", "schema", "properties", "data", "maxItems"}, MaxPageSize},
		{[]string{"components", "schemas", "CreateAgentRequest", "properties", "name", "maxLength"}, domain.MaxAgentNameLength},
		{[]string{"components", "schemas", "UpdateAgentRequest", "properties", "name", "maxLength"}, domain.MaxAgentNameLength},
		{[]string{"components", "schemas", "AgentRecord", "properties", "name", "maxLength"}, domain.MaxAgentNameLength},
		{[]string{"components", "schemas", "CreateAgentRequest", "properties", "instructions", "maxLength"}, domain.MaxInstructionsLength},
		{[]string{"components", "schemas", "UpdateAgentRequest", "properties", "instructions", "maxLength"}, domain.MaxInstructionsLength},
		{[]string{"components", "schemas", "AgentRecord", "properties", "instructions", "maxLength"}, domain.MaxInstructionsLength},
		{[]string{"components", "schemas", "AskRequest", "properties", "question", "maxLength"}, domain.MaxQuestionLength},
		{[]string{"components", "schemas", "Answer", "properties", "question", "maxLength"}, domain.MaxQuestionLength},
	} {
		if got := d.at(c.path...); got != c.want {
			t.Errorf("%s: %v, the code says %v", strings.Join(c.path, "."), got, c.want)
		}
	}
	// limit is declared as what the service accepts (any string), its
	// rule in words.
	if got := d.at("components", "parameters", "limit", "schema", "default"); got != strconv.Itoa(DefaultPageSize) {
		t.Errorf("limit default %v, the code says %d", got, DefaultPageSize)
	}
	limitDesc := d.at("components", "parameters", "limit", "description").(string)
	for _, want := range []string{fmt.Sprintf("clamped to %d", MaxPageSize), fmt.Sprintf("falls back to %d", DefaultPageSize)} {
		if !strings.Contains(limitDesc, want) {
			t.Errorf("limit's description does not say %q: %q", want, limitDesc)
		}
	}
}

// raw sends one request straight to the handler, for exchanges f.do cannot
// take (no body, not JSON).
func (f *fixture) raw(method, path string, headers ...string) *httptest.ResponseRecorder {
	f.t.Helper()
	hr := httptest.NewRequest(method, "http://api.test"+path, nil)
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		hr.Header.Add(name, strings.TrimSpace(value))
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, hr) // validated by the fixture's handler
	return rec
}

// TestOpenAPIServed fetches the document through the real handler stack:
// no key, JSON, cacheable, byte for byte the embedded one, and counted
// against the address's limit of requests without a key, whose headers it
// carries.
func TestOpenAPIServed(t *testing.T) {
	const limit = 10
	f := newFixture(t, "sqlite", func(c *Config) { c.UnauthRateLimit = limit })
	used := 0
	for range 3 {
		rec := f.raw("GET", "/v1/openapi.json")
		used++
		openAPIServedCheckDocument(t, rec, limit, used)
	}

	if rec := f.raw("HEAD", "/v1/openapi.json"); rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("ETag") != openAPIETag {
		t.Fatalf("HEAD: %d, %d bytes, %v", rec.Code, rec.Body.Len(), rec.Header())
	}
	used++
	for _, c := range []struct {
		ifNoneMatch string
		want        int
	}{
		{openAPIETag, 304},
		{"W/" + openAPIETag, 304},
		{`"other", ` + openAPIETag, 304},
		{"*", 304},
		{`"other"`, 200},
	} {
		rec := f.raw("GET", "/v1/openapi.json", "If-None-Match: "+c.ifNoneMatch)
		used++
		openAPIServedCheckConditional(t, rec, c.ifNoneMatch, c.want, limit-used)
	}
	// Past the address's limit: 429, for the document and for every other
	// request without a key from that address.
	for used < limit {
		f.raw("GET", "/v1/openapi.json", "If-None-Match: "+openAPIETag)
		used++
	}
	openAPIServedCheckPastLimit(t, f)

	// With a query string, or another method, it is no endpoint: the order
	// of checks applies as everywhere under /v1.
	key := f.key(domain.ScopeAgentsRead)
	// (From another address: this one's allowance is spent.)
	const elsewhere = "192.0.2.7:4321"
	f.do(req{method: "GET", path: "/v1/openapi.json?format=yaml", remote: elsewhere}).wantError(t, 401, domain.CodeInvalidCredentials)
	f.get("/v1/openapi.json?format=yaml", key).wantError(t, 404, domain.CodeNotFound)
	f.do(req{method: "GET", path: "/v1/openapi.json?api_key=x", remote: elsewhere}).wantError(t, 403, domain.CodeAccessDenied)
	f.send("POST", "/v1/openapi.json", key, `{}`).wantError(t, 404, domain.CodeNotFound)

	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, %v", doc.OpenAPI, err)
	}
	if !bytes.Equal(OpenAPIDocument(), openAPIDocument) {
		t.Fatal("OpenAPIDocument differs from the embedded document")
	}
}

// openAPIServedCheckDocument checks one GET of the document: the embedded
// document, as JSON, cacheable, without a key, and counted as the used-th
// of the address's limit requests.
func openAPIServedCheckDocument(t *testing.T, rec *httptest.ResponseRecorder, limit, used int) {
	t.Helper()
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	h := rec.Header()
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), openAPIDocument) {
		t.Fatal("served document differs from openapi.json")
	}
	if h.Get("ETag") != openAPIETag || h.Get("Cache-Control") == "" || h.Get("X-Request-Id") == "" {
		t.Fatalf("headers %v", h)
	}
	if h.Get("Content-Length") != strconv.Itoa(len(openAPIDocument)) {
		t.Fatalf("Content-Length %q", h.Get("Content-Length"))
	}
	if h.Get("X-RateLimit-Limit") != strconv.Itoa(limit) || h.Get("X-RateLimit-Remaining") != strconv.Itoa(limit-used) ||
		h.Get("RateLimit-Policy") != `"per-address";q=10;w=60` {
		t.Fatalf("rate-limit headers after %d requests: %v", used, h)
	}
	if h.Get("WWW-Authenticate") != "" || h.Get("Retry-After") != "" {
		t.Fatalf("headers %v", h)
	}
}

// openAPIServedCheckConditional checks the answer to a GET with
// If-None-Match: the status wanted, no body on a 304, and remaining
// requests left of the address's limit.
func openAPIServedCheckConditional(t *testing.T, rec *httptest.ResponseRecorder, ifNoneMatch string, want, remaining int) {
	t.Helper()
	if rec.Code != want {
		t.Fatalf("If-None-Match %s: %d, want %d", ifNoneMatch, rec.Code, want)
	}
	if want == 304 && rec.Body.Len() != 0 {
		t.Fatal("304 with a body")
	}
	if got := rec.Header().Get("X-RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Fatalf("X-RateLimit-Remaining %q on a %d, want %d", got, rec.Code, remaining)
	}
}

// openAPIServedCheckPastLimit checks that, the address's limit spent, the
// document (GET and HEAD) and every other request without a key get 429.
func openAPIServedCheckPastLimit(t *testing.T, f *fixture) {
	t.Helper()
	r := f.do(req{method: "GET", path: "/v1/openapi.json"})
	r.wantError(t, 429, domain.CodeRateLimitExceeded)
	if r.Header().Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.Header())
	}
	if rec := f.raw("HEAD", "/v1/openapi.json"); rec.Code != 429 || rec.Body.Len() != 0 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("HEAD past the limit: %d, %d bytes, %v", rec.Code, rec.Body.Len(), rec.Header())
	}
	f.get("/v1/me", "").wantError(t, 429, domain.CodeRateLimitExceeded)
}

// failSwitch makes the key limiter fail on demand: a failure on the
// service side, for the 500 of every operation.
type failSwitch struct {
	ratelimit.Limiter
	broken atomic.Bool
}

func (l *failSwitch) Allow(ctx context.Context, key string, limit int) (ratelimit.Result, error) {
	if l.broken.Load() {
		return ratelimit.Result{}, errors.New("limiter unreachable")
	}
	return l.Limiter.Allow(ctx, key, limit)
}

// TestOpenAPICoverage drives every documented (operation, status) pair
// through the real stack: each is produced, and so validated against the
// document, at least once. None is left out as impossible to produce.
func TestOpenAPICoverage(t *testing.T) {
	opt, _ := withModel(t, llmtest.Echo)
	sw := &failSwitch{}
	f := newFixture(t, "sqlite", opt, func(c *Config) { sw.Limiter = c.Limiter; c.Limiter = sw })
	if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	admin := f.key(allAgentScopes...)
	noScope := f.key(domain.ScopeStaffRead)
	limited := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1 }, allAgentScopes...).Credential
	agent := f.createAgent(admin, "Covered")
	f.createAgent(admin, "Taken")
	disabled := f.createAgent(admin, "Off")
	f.send("PUT", "/v1/ai-agents/"+disabled+"/enabled", admin, `{"enabled":false}`).wantStatus(t, 200)
	// A second account's agent: not found for this one, never forbidden.
	otherAcct, otherOwner := f.newAccount("Other")
	elsewhere := f.createAgent(f.keyIn(otherAcct, otherOwner, nil, allAgentScopes...).Credential, "Elsewhere")
	f.get("/v1/me", limited).wantStatus(t, 200) // its whole allowance for the minute
	huge := `{"name":"` + strings.Repeat("a", MaxBodyBytes) + `"}`

	ops := []openAPICoverageOp{
		{method: "GET", path: "/v1/me"},
		{method: "GET", path: "/v1/ai-agents"},
		{method: "POST", path: "/v1/ai-agents", body: `{"name":"New"}`,
			conflict: req{method: "POST", path: "/v1/ai-agents", body: `{"name":"taken"}`}},
		{method: "GET", path: "/v1/ai-agents/{id}"},
		{method: "PATCH", path: "/v1/ai-agents/{id}", body: `{"instructions":"Be brief."}`,
			conflict: req{method: "PATCH", path: "/v1/ai-agents/" + agent, body: `{"name":"Taken"}`}},
		{method: "PUT", path: "/v1/ai-agents/{id}/enabled", body: `{"enabled":true}`},
		{method: "GET", path: "/v1/ai-agents/{id}/stats"},
		{method: "POST", path: "/v1/ai-agents/{id}/questions", body: `{"question":"Hello?"}`,
			conflict: req{method: "POST", path: "/v1/ai-agents/" + disabled + "/questions", body: `{"question":"Hello?"}`}},
	}
	cov := &openAPICoverageCallers{f: f, sw: sw, admin: admin, noScope: noScope, limited: limited, agent: agent, elsewhere: elsewhere, huge: huge}
	for _, o := range ops {
		cov.drive(t, o)
	}
	openAPICoverageWebhooks(t, cov)
	// A streamed answer: the questions' 200, checked event by event.
	streamed := httptest.NewRequest("POST", "http://api.test/v1/ai-agents/"+agent+"/questions", strings.NewReader(`{"question":"Hello?","stream":true}`))
	streamed.Header.Set("Authorization", "Bearer "+admin)
	streamed.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	if f.h.ServeHTTP(rec, streamed); rec.Code != 200 {
		t.Fatalf("streamed question: %d %s", rec.Code, rec.Body.String())
	}
	// Requests that are no operation.
	f.get("/v1/nowhere", admin).wantError(t, 404, domain.CodeNotFound)
	f.get("/v1/nowhere", "").wantError(t, 401, domain.CodeInvalidCredentials)
	f.get("/v1/nowhere?token=x", admin).wantError(t, 403, domain.CodeAccessDenied)
	f.get("/v1/nowhere", limited).wantError(t, 429, domain.CodeRateLimitExceeded)
	sw.broken.Store(true)
	f.get("/v1/nowhere", admin).wantError(t, 500, domain.CodeServerError)
	sw.broken.Store(false)
	// The document itself.
	f.raw("GET", "/v1/openapi.json")
	f.raw("GET", "/v1/openapi.json", "If-None-Match: "+openAPIETag)
	f.raw("HEAD", "/v1/openapi.json")
	f.raw("HEAD", "/v1/openapi.json", "If-None-Match: "+openAPIETag)

	seen.Lock()
	defer seen.Unlock()
	if missing := openAPICoverageMissing(openAPIOps(t)); len(missing) > 0 {
		t.Fatalf("documented but never produced and validated: %v", missing)
	}
	t.Logf("%d exchanges validated against openapi.json so far in this test binary", oaChecked.Load())
}

// openAPICoverageOp is an operation TestOpenAPICoverage drives through
// the statuses it documents.
type openAPICoverageOp struct {
	method, path, body string
	conflict           req // a request that gets 409, if the operation has one
}

// openAPICoverageCallers are TestOpenAPICoverage's fixture, its limiter
// switch, its keys (every scope, no agent scope, an allowance spent), its
// agent, the other account's agent, and a body over the limit.
type openAPICoverageCallers struct {
	f                       *fixture
	sw                      *failSwitch
	admin, noScope, limited string
	agent, elsewhere, huge  string
}

// drive sends one operation's requests, for each of its statuses: the
// answer, then 400, 401, 403, 429, 404, the scope's 403, 415 and 413 (with
// a body), 409 (with a conflict), and 500.
func (c *openAPICoverageCallers) drive(t *testing.T, o openAPICoverageOp) {
	t.Helper()
	path := strings.Replace(o.path, "{id}", c.agent, 1)
	send := func(key, p, body string, headers ...string) *response {
		return c.f.do(req{method: o.method, path: p, key: key, body: body, headers: headers})
	}
	if r := send(c.admin, path, o.body); r.Code != 200 && r.Code != 201 {
		t.Fatalf("%s %s: %d %s", o.method, path, r.Code, r.Body.String())
	}
	send(c.admin, path+"?unknown=1", o.body).wantError(t, 400, domain.CodeInvalidField, "unknown:invalid_field")
	send("", path, o.body).wantError(t, 401, domain.CodeInvalidCredentials)
	send(c.admin, path+"?access_token=x", o.body).wantError(t, 403, domain.CodeAccessDenied)
	send(c.limited, path, o.body).wantError(t, 429, domain.CodeRateLimitExceeded)
	if strings.Contains(o.path, "{id}") {
		send(c.admin, strings.Replace(o.path, "{id}", c.elsewhere, 1), o.body).wantError(t, 404, domain.CodeNotFound)
	}
	if o.path != "/v1/me" {
		send(c.noScope, path, o.body).wantError(t, 403, domain.CodeAccessDenied)
	}
	if o.body != "" {
		send(c.admin, path, o.body, "Content-Type: text/plain").wantError(t, 415, domain.CodeUnsupportedType)
		send(c.admin, path, c.huge).wantError(t, 413, domain.CodeFileTooLarge)
	}
	if o.conflict.method != "" {
		cr := o.conflict
		cr.key = c.admin
		if r := c.f.do(cr); r.Code != 409 {
			t.Fatalf("%s %s: %d, want 409: %s", cr.method, cr.path, r.Code, r.Body.String())
		}
	}
	c.sw.broken.Store(true)
	send(c.admin, path, o.body).wantError(t, 500, domain.CodeServerError)
	c.sw.broken.Store(false)
}

// openAPICoverageMissing lists the documented (operation, status) pairs,
// and the statuses of requests that are no operation, never seen; the
// caller holds seen's lock.
func openAPICoverageMissing(ops []openAPIOp) []string {
	var missing []string
	for _, o := range ops {
		for _, s := range o.Statuses {
			// 503 is an instance at its bounds (model calls in flight, body
			// memory), which this fixture cannot reach; the bounds' own tests
			// produce it through openAPIChecked.
			if !seen.pairs[o.ID+" "+s] && s != "503" {
				missing = append(missing, o.ID+" "+s)
			}
		}
	}
	for _, s := range unmatchedStatuses {
		if !seen.pairs["unmatched "+strconv.Itoa(s)] {
			missing = append(missing, "unmatched "+strconv.Itoa(s))
		}
	}
	return missing
}

// TestOpenAPICheckCatchesDrift feeds the validation hook real responses
// altered the way code drifts (a field added, a header dropped, an
// undocumented status or code), and asserts it fails each one, while it
// passes the unaltered response.
func TestOpenAPICheckCatchesDrift(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	agent := f.createAgent(key, "Drift")
	f.createAgent(key, "Taken")

	exchange := func(method, path, body string) (*http.Request, *httptest.ResponseRecorder) {
		var rd *strings.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		hr := httptest.NewRequest(method, "http://api.test"+path, nil)
		if rd != nil {
			hr = httptest.NewRequest(method, "http://api.test"+path, rd)
			hr.Header.Set("Content-Type", "application/json")
		}
		hr.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, hr)
		return hr, rec
	}
	// rebuilt is rec with its headers and body altered.
	rebuilt := func(rec *httptest.ResponseRecorder, status int, header func(http.Header), body func(map[string]any)) *httptest.ResponseRecorder {
		return openAPICheckDriftRebuilt(t, rec, status, header, body)
	}
	check := func(hr *http.Request, body string, rec *httptest.ResponseRecorder) string {
		return openAPIProblem(recorded(hr, body, rec, f.clock.Now()))
	}
	errorOf := func(obj map[string]any) map[string]any { return obj["error"].(map[string]any) }

	listReq, list := exchange("GET", "/v1/ai-agents", "")
	meReq, me := exchange("GET", "/v1/me", "")
	getReq, get := exchange("GET", "/v1/ai-agents/"+agent, "")
	createReq, created := exchange("POST", "/v1/ai-agents", `{"name":"Fresh"}`)
	dupReq, dup := exchange("POST", "/v1/ai-agents", `{"name":"Taken"}`)
	badReq, bad := exchange("POST", "/v1/ai-agents", `{"name":1}`)
	anonReq := httptest.NewRequest("GET", "http://api.test/v1/me", nil)
	anon := httptest.NewRecorder()
	f.h.ServeHTTP(anon, anonReq)

	for _, c := range []struct {
		name string
		req  *http.Request
		body string
		rec  *httptest.ResponseRecorder
		want string // "" when the exchange must pass
	}{
		{"list as served", listReq, "", list, ""},
		{"me as served", meReq, "", me, ""},
		{"create as served", createReq, `{"name":"Fresh"}`, created, ""},
		{"duplicate as served", dupReq, `{"name":"Taken"}`, dup, ""},
		{"400 as served", badReq, `{"name":1}`, bad, ""},
		{"401 as served", anonReq, "", anon, ""},
		{"list item with a fifth field", listReq, "", rebuilt(list, 0, nil, func(o map[string]any) {
			o["data"].([]any)[0].(map[string]any)["updated_at"] = "2026-11-22T12:00:00.000Z"
		}), "does not match"},
		{"meta with a total", listReq, "", rebuilt(list, 0, nil, func(o map[string]any) {
			o["meta"].(map[string]any)["total"] = 2
		}), "does not match"},
		{"next without has_more", listReq, "", rebuilt(list, 0, nil, func(o map[string]any) {
			o["meta"].(map[string]any)["next"] = "abc"
		}), "next is null exactly when has_more is false"},
		{"record without updated_at", getReq, "", rebuilt(get, 0, nil, func(o map[string]any) {
			delete(o["data"].(map[string]any), "updated_at")
		}), "does not match"},
		{"timestamp not in UTC", getReq, "", rebuilt(get, 0, nil, func(o map[string]any) {
			o["data"].(map[string]any)["created_at"] = "2026-11-22T13:00:00.000+01:00"
		}), "does not match"},
		{"key with its secret", meReq, "", rebuilt(me, 0, nil, func(o map[string]any) {
			o["data"].(map[string]any)["secret"] = "x"
		}), "does not match"},
		{"no X-Request-Id", meReq, "", rebuilt(me, 0, func(h http.Header) { h.Del("X-Request-Id") }, nil), "does not match"},
		{"no rate-limit fields", meReq, "", rebuilt(me, 0, func(h http.Header) {
			for _, n := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"} {
				h.Del(n)
			}
		}, nil), "does not match"},
		{"RateLimit disagreeing with X-RateLimit-Remaining", meReq, "", rebuilt(me, 0, func(h http.Header) {
			h.Set("X-RateLimit-Remaining", "7")
		}, nil), "RateLimit"},
		{"create without Location", createReq, `{"name":"Fresh"}`, rebuilt(created, 0, func(h http.Header) { h.Del("Location") }, nil), "does not match"},
		{"create answered 200", createReq, `{"name":"Fresh"}`, rebuilt(created, 200, nil, nil), "does not list"},
		{"existing_id on another code", badReq, `{"name":1}`, rebuilt(bad, 0, nil, func(o map[string]any) {
			errorOf(o)["existing_id"] = "agt_x"
		}), "does not match"},
		{"code of another status", badReq, `{"name":1}`, rebuilt(bad, 0, nil, func(o map[string]any) {
			errorOf(o)["code"] = "not_found"
		}), "x-error-codes"},
		{"unknown code", badReq, `{"name":1}`, rebuilt(bad, 0, nil, func(o map[string]any) {
			errorOf(o)["code"] = "oops"
		}), "does not match"},
		{"existing_id on immutable_state", dupReq, `{"name":"Taken"}`, rebuilt(dup, 0, nil, func(o map[string]any) {
			errorOf(o)["code"] = "immutable_state"
		}), "existing_id on immutable_state"},
		{"409 with a 400's code", dupReq, `{"name":"Taken"}`, rebuilt(dup, 0, nil, func(o map[string]any) {
			errorOf(o)["code"] = "invalid_value"
			delete(errorOf(o), "existing_id")
		}), "x-error-codes"},
		{"error with a stack", badReq, `{"name":1}`, rebuilt(bad, 0, nil, func(o map[string]any) {
			errorOf(o)["stack"] = "goroutine 1"
		}), "does not match"},
		{"401 without WWW-Authenticate", anonReq, "", rebuilt(anon, 0, func(h http.Header) { h.Del("WWW-Authenticate") }, nil), "does not match"},
		{"unknown path answered 400", httptest.NewRequest("GET", "http://api.test/v1/nowhere", nil), "", rebuilt(anon, 400, nil, nil), "no documented operation"},
		{"accepted request the document refuses", createReq, `{"name":"Fresh","color":"red"}`, created, "request is invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			openAPICheckDriftVerdict(t, check(c.req, c.body, c.rec), c.want)
		})
	}
}

// openAPICheckDriftRebuilt is rec with its headers and body altered (its
// status too, unless status is 0).
func openAPICheckDriftRebuilt(t *testing.T, rec *httptest.ResponseRecorder, status int, header func(http.Header), body func(map[string]any)) *httptest.ResponseRecorder {
	t.Helper()
	out := httptest.NewRecorder()
	for k, v := range rec.Header() {
		out.Header()[k] = slices.Clone(v)
	}
	if header != nil {
		header(out.Header())
	}
	var obj map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &obj); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		body(obj)
	}
	b, _ := json.Marshal(obj)
	out.Header().Set("Content-Length", strconv.Itoa(len(b)))
	if status == 0 {
		status = rec.Code
	}
	out.WriteHeader(status)
	out.Write(b)
	return out
}

// openAPICheckDriftVerdict checks what the hook said of one exchange: got
// is "" when want is (a valid exchange), and names want otherwise.
func openAPICheckDriftVerdict(t *testing.T, got, want string) {
	t.Helper()
	switch {
	case want == "" && got != "":
		t.Fatalf("the check failed a valid exchange: %s", got)
	case want != "" && !strings.Contains(got, want):
		t.Fatalf("the check passed or failed for another reason (want %q): %q", want, got)
	}
}

// BenchmarkOpenAPICheck is what the hook adds to one exchange of the suite
// (a list page of 30 agents); the validator is built once per test binary.
func BenchmarkOpenAPICheck(b *testing.B) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	items := make([]wire.AgentItem, 30)
	for i := range items {
		items[i] = wire.AgentItem{ID: domain.NewID(domain.PrefixAgent, now), Name: fmt.Sprint("Agent ", i), Enabled: true, CreatedAt: wire.Time(now)}
	}
	next := "AQAAAZqxL8gAYWd0XzAxbTgxajE4ZzA4d3l4Y2Z6ams5NHpyanBj"
	rec := httptest.NewRecorder()
	h := rec.Header()
	h.Set("X-Request-Id", domain.NewRequestID(time.Now()))
	setCORS(h) // every /v1 response carries them, and the check wants them
	setRateHeaders(h, ratelimit.Result{Allowed: true, Limit: 120, Remaining: 119, Reset: now.Add(time.Minute)}, now, "per-key")
	writeJSON(rec, http.StatusOK, collection{Data: items, Meta: meta{Limit: 30, Next: &next, HasMore: true}})
	hr := httptest.NewRequest("GET", "http://api.test/v1/ai-agents?limit=30", nil)
	hr.Header.Set("Authorization", "Bearer agk_test_x")
	openAPI(b)
	b.ResetTimer()
	for range b.N {
		if p := openAPIProblem(recorded(hr, "", rec, now)); p != "" {
			b.Fatal(p)
		}
	}
}

// errorTB keeps what openAPIChecked reports.
type errorTB struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (e *errorTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.msgs = append(e.msgs, fmt.Sprintf(format, args...))
}

// TestOpenAPICheckedReports proves the fixture's wrapper reports a response
// that drifted, as the handler wrote it (headers as of WriteHeader), and
// passes it on to the client unchanged.
func TestOpenAPICheckedReports(t *testing.T) {
	tb := &errorTB{TB: t}
	body := `{"data":{"id":"key_x"}}`
	h := openAPIChecked(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setCORS(w.Header()) // as every /v1 response: the drift reported is the one below
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("X-Request-Id", "req_000000000000000000000000") // too late to be sent
		_, _ = io.WriteString(w, body)
	}), time.Now)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/me", nil))
	if rec.Code != 200 || rec.Body.String() != body {
		t.Fatalf("the wrapper changed the response: %d %q", rec.Code, rec.Body.String())
	}
	if len(tb.msgs) != 1 || !strings.Contains(tb.msgs[0], "getMe") || !strings.Contains(tb.msgs[0], "X-Request-Id") ||
		!strings.Contains(tb.msgs[0], "missing properties 'name'") {
		t.Fatalf("reports %q", tb.msgs)
	}
}

// FuzzOpenAPI: whatever the request (method, path, query, content type,
// body), the real handler stack answers what the document describes.
func FuzzOpenAPI(f *testing.F) {
	f.Add("POST", "/v1/ai-agents", "", "application/json", `{"name":"x","instructions":"y"}`)
	f.Add("PATCH", "/v1/ai-agents/agt_1", "", "application/json", `{"name":null}`)
	f.Add("PUT", "/v1/ai-agents/agt_1/enabled", "", "application/json", `{"enabled":"yes"}`)
	f.Add("GET", "/v1/ai-agents", "limit=500&updated_since=2026-01-02T03:04:05Z", "", "")
	f.Add("GET", "/v1/ai-agents", "next=abc&next=def", "", "")
	f.Add("POST", "/v1/ai-agents/agt_1/questions", "", "application/json; charset=utf-8", `{"question":""}`)
	f.Add("GET", "/v1/openapi.json", "", "", "")
	f.Add("HEAD", "/v1/openapi.json", "x=1", "", "")
	f.Add("DELETE", "/v1/me", "Token=1", "", "")
	f.Fuzz(func(t *testing.T, method, path, query, ctype, body string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path+query, " \r\n#?") {
			return
		}
		fx := fuzzFixture(t)
		r := httptest.NewRequest("GET", "http://api.test/", nil)
		r.Method, r.URL.Path, r.URL.RawQuery, r.Body = method, path, query, http.NoBody
		if body != "" {
			r.Body, r.ContentLength = ioNopCloser(body), int64(len(body))
		}
		r.Header.Set("Authorization", "Bearer "+fx.key)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		openAPIChecked(t, fx.h, time.Now).ServeHTTP(httptest.NewRecorder(), r)
	})
}
