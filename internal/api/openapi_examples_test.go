package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	validator "github.com/pb33f/libopenapi-validator"
)

// TestOpenAPIExamples is a dry run of what example-driven tools (Dredd,
// mock servers, rendered samples) do with the document: every parameter,
// request body and response, and every header of a response, has an
// example, except the parameters in sentAsIs, which have none; a request
// built from the examples is valid, and every response example, with its
// headers' examples, validates as the response of its operation and status.
func TestOpenAPIExamples(t *testing.T) {
	w := &openAPIExamplesWalk{t: t, v: openAPI(t)}
	if err := json.Unmarshal(openAPIDocument, &w.doc); err != nil {
		t.Fatal(err)
	}
	for tmpl, item := range w.doc["paths"].(map[string]any) {
		item := item.(map[string]any)
		for _, method := range httpMethods {
			op, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			w.checkOperation(tmpl, method, item, op)
		}
	}
	t.Logf("%d examples checked", w.checked)
}

// openAPIExamplesWalk is TestOpenAPIExamples' walk of the document: the
// validator, the document, and the count of examples checked so far.
type openAPIExamplesWalk struct {
	t       *testing.T
	v       validator.Validator
	doc     map[string]any
	checked int
}

// resolve follows a node's $ref, if it has one, within the document.
func (w *openAPIExamplesWalk) resolve(node any) map[string]any {
	m, _ := node.(map[string]any)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var cur any = w.doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		cur = cur.(map[string]any)[part]
	}
	return cur.(map[string]any)
}

// examplesOf lists an object's example values: "example", or each of
// "examples"' values; none is a failure.
func (w *openAPIExamplesWalk) examplesOf(where string, obj map[string]any) []any {
	w.t.Helper()
	if e, ok := obj["example"]; ok {
		return []any{e}
	}
	var out []any
	ex, _ := obj["examples"].(map[string]any)
	names := make([]string, 0, len(ex))
	for n := range ex {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, w.resolve(ex[n])["value"])
	}
	if len(out) == 0 {
		w.t.Errorf("%s has no example", where)
	}
	return out
}

// openAPIExamplesText is an example value as a parameter or header sends
// it: a string as is, anything else as JSON.
func openAPIExamplesText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// openAPIExamplesRequest is the request an operation's parameters'
// examples build, without its body.
type openAPIExamplesRequest struct {
	method, path string
	query        url.Values
	header       http.Header
}

// build is the request with a body (none when nil).
func (rq *openAPIExamplesRequest) build(body any) *http.Request {
	u := &url.URL{Scheme: "http", Host: "api.test", Path: "/v1" + rq.path, RawQuery: rq.query.Encode()}
	r := &http.Request{Method: strings.ToUpper(rq.method), URL: u, Host: u.Host, Header: rq.header.Clone(), Body: http.NoBody,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	if body != nil {
		b, _ := json.Marshal(body)
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// checkOperation checks one operation: the requests built from its
// examples, then every response, from its examples.
func (w *openAPIExamplesWalk) checkOperation(tmpl, method string, item, op map[string]any) {
	w.t.Helper()
	id := op["operationId"].(string)
	// The request, from the parameters' examples.
	rq := w.requestOf(id, tmpl, method, item, op)
	bodies := []any{nil}
	if rb := w.resolve(op["requestBody"]); rb != nil {
		bodies = w.examplesOf(id+" request body", rb["content"].(map[string]any)["application/json"].(map[string]any))
	}
	for _, body := range bodies {
		if ok, errs := w.v.ValidateHttpRequestSync(rq.build(body)); !ok {
			w.t.Errorf("%s: the request built from the examples (%s %s, body %v) is invalid:\n%s", id, method, rq.path, body, describe(errs))
		}
		w.checked++
	}
	// Every response, from its examples.
	for status, resp := range op["responses"].(map[string]any) {
		w.checkResponse(id, status, w.resolve(resp), rq)
	}
}

// requestOf builds an operation's request from its parameters' examples
// (the path item's, then the operation's), with a key unless the
// operation needs none.
func (w *openAPIExamplesWalk) requestOf(id, tmpl, method string, item, op map[string]any) *openAPIExamplesRequest {
	w.t.Helper()
	rq := &openAPIExamplesRequest{method: method, path: tmpl, query: url.Values{}, header: http.Header{}}
	if op["security"] == nil || len(op["security"].([]any)) > 0 {
		rq.header.Set("Authorization", "Bearer agk_live_vcnr20v0g53v_0123456789abcdefghijABCDEFGHIJklmnopqrst")
	}
	params, _ := item["parameters"].([]any)
	opParams, _ := op["parameters"].([]any)
	for _, p := range append(slices.Clone(params), opParams...) {
		w.applyParam(id, w.resolve(p), rq)
	}
	return rq
}

// applyParam puts a parameter's first example where it goes in the
// request; a parameter in sentAsIs must have none, and is left out.
func (w *openAPIExamplesWalk) applyParam(id string, p map[string]any, rq *openAPIExamplesRequest) {
	w.t.Helper()
	name := p["name"].(string)
	if sentAsIs[name] {
		if _, ok := p["example"]; ok || p["examples"] != nil {
			w.t.Errorf("%s parameter %s has an example, which tools would send as is", id, name)
		}
		return
	}
	ex := w.examplesOf(fmt.Sprintf("%s parameter %s", id, name), p)
	if len(ex) == 0 {
		return
	}
	switch p["in"] {
	case "path":
		rq.path = strings.ReplaceAll(rq.path, "{"+name+"}", url.PathEscape(openAPIExamplesText(ex[0])))
	case "query":
		rq.query.Set(name, openAPIExamplesText(ex[0]))
	case "header":
		rq.header.Set(name, openAPIExamplesText(ex[0]))
	}
}

// checkResponse checks each of a response's examples, with its headers'
// examples, as the answer to the request.
func (w *openAPIExamplesWalk) checkResponse(id, status string, resp map[string]any, rq *openAPIExamplesRequest) {
	w.t.Helper()
	where := fmt.Sprintf("%s %s", id, status)
	h := http.Header{}
	headers, _ := resp["headers"].(map[string]any)
	for name, hd := range headers {
		if ex := w.examplesOf(where+" header "+name, w.resolve(hd)); len(ex) > 0 {
			h.Set(name, openAPIExamplesText(ex[0]))
		}
	}
	var code int
	fmt.Sscan(status, &code)
	bodies := []any{nil}
	ctype := "application/json"
	if content, ok := resp["content"].(map[string]any); ok {
		if _, ok := content["text/event-stream"]; ok {
			ctype = "text/event-stream" // its example is the stream's text
		}
		h.Set("Content-Type", ctype)
		bodies = w.examplesOf(where+" response", content[ctype].(map[string]any))
	}
	for _, body := range bodies {
		w.checkResponseBody(where, code, ctype, h, body, rq.build(bodies[0]))
	}
}

// checkResponseBody checks one response example against the document, the
// body rules and the event stream's rules.
func (w *openAPIExamplesWalk) checkResponseBody(where string, code int, ctype string, h http.Header, body any, req *http.Request) {
	w.t.Helper()
	var b []byte
	if s, ok := body.(string); ok && ctype == "text/event-stream" {
		b = []byte(s)
	} else if body != nil && req.Method != "HEAD" { // a HEAD answer has no body
		b, _ = json.Marshal(body)
	}
	r := &http.Response{StatusCode: code, Header: h, Request: req, Body: io.NopCloser(strings.NewReader(string(b))), ContentLength: int64(len(b))}
	if ok, errs := w.v.ValidateHttpResponse(req, r); !ok {
		w.t.Errorf("%s: the response example %s does not match the document:\n%s", where, b, describe(errs))
	}
	x := exchange{req: req, status: code, header: h, resp: b}
	if op, ok := matchOp(openAPIOps(w.t), req.Method, req.URL.Path); ok {
		if p := bodyRuleProblem(op, x); p != "" {
			w.t.Errorf("%s: the response example %s: %s", where, b, p)
		}
		if p := sseProblem(op, x); p != "" {
			w.t.Errorf("%s: the response example %s: %s", where, b, p)
		}
	}
	w.checked++
}

// sentAsIs are the parameters whose example a tool (Swagger UI's "Try it
// out", Dredd) would send as is, to harm: one Idempotency-Key shared by
// every user of the tool for 24 hours, a cursor that is always invalid, a
// filter that hides the caller's newer agents. They have no example.
var sentAsIs = map[string]bool{"Idempotency-Key": true, "next": true, "updated_since": true, "created_since": true}

// TestOpenAPILimitAsAccepted: the document accepts every limit the service
// accepts (clamped or falling back to the default), so a request validator
// in front of the service refuses none of them; and the service answers
// each with a page.
func TestOpenAPILimitAsAccepted(t *testing.T) {
	v := openAPI(t)
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	f.createAgent(key, "Paged")
	for _, limit := range []string{"1000", "0", "abc", "", "-5", "2.5", "1e3", "007", "50"} {
		r := httptest.NewRequest("GET", "http://api.test/v1/ai-agents?limit="+url.QueryEscape(limit), nil)
		r.Header.Set("Authorization", "Bearer "+key)
		if ok, errs := v.ValidateHttpRequestSync(r); !ok {
			t.Errorf("limit=%q: the document refuses it:\n%s", limit, describe(errs))
		}
		// Through the fixture, which validates the accepted request too.
		f.get("/v1/ai-agents?limit="+url.QueryEscape(limit), key).wantStatus(t, 200)
	}
}

// TestOpenAPIRequestsHaveNoDefault: a default on a request property makes
// openapi-typescript declare the property required (AskRequest.stream's
// did: a body without it failed tsc), and example-driven tools send it.
func TestOpenAPIRequestsHaveNoDefault(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	requests := 0
	for name, schema := range doc.Components.Schemas {
		if !strings.HasSuffix(name, "Request") {
			continue
		}
		requests++
		for prop, p := range schema.Properties {
			if d, ok := p["default"]; ok {
				t.Errorf("%s.%s has default %v", name, prop, d)
			}
		}
	}
	if requests < 4 {
		t.Fatalf("found %d request schemas", requests)
	}
}
