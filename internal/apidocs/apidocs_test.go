package apidocs_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/apidocs"
)

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func render(t *testing.T, doc []byte) string {
	t.Helper()
	h, err := apidocs.New(doc)
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, h, http.MethodGet, apidocs.Path)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /docs: %d", rec.Code)
	}
	return rec.Body.String()
}

// The reference shows every operation of the service's own document under
// its tag, with its method and path, summary, scope, parameters, request
// body, every response status with its error codes, and every schema.
func TestRendersEveryOperation(t *testing.T) {
	raw := api.OpenAPIDocument()
	body := render(t, raw)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
		Tags  []struct{ Name string }               `json:"tags"`
		Comps struct {
			Schemas   map[string]json.RawMessage `json:"schemas"`
			Responses map[string]struct {
				Codes []string `json:"x-error-codes"`
			} `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	ops := 0
	for path, item := range doc.Paths {
		for method, v := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string                     `json:"operationId"`
				Summary     string                     `json:"summary"`
				Scope       *string                    `json:"x-scope"`
				Parameters  []json.RawMessage          `json:"parameters"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(v, &op); err != nil {
				t.Fatal(err)
			}
			ops++
			i := strings.Index(body, `id="op-`+op.OperationID+`"`)
			if i < 0 {
				t.Errorf("%s %s: no section", method, path)
				continue
			}
			section := body[i:]
			section = section[:strings.Index(section, "</article>")]
			want := []string{`>` + strings.ToUpper(method) + `</span> <code class="path">` + path + `</code>`, escape(op.Summary)}
			if op.Scope != nil {
				want = append(want, `<code class="scope">`+*op.Scope+`</code>`)
			}
			for status := range op.Responses {
				want = append(want, `<span class="status status-`+status[:1]+`">`+status+`</span>`)
			}
			for _, w := range want {
				if !strings.Contains(section, w) {
					t.Errorf("%s %s: the section lacks %q", method, path, w)
				}
			}
		}
	}
	if n := strings.Count(body, `<article class="card op"`); n != ops || ops < 8 {
		t.Errorf("%d operations rendered, %d in the document", n, ops)
	}
	for _, tag := range doc.Tags {
		if !strings.Contains(body, "<h2>"+tag.Name+"</h2>") {
			t.Errorf("no section for tag %s", tag.Name)
		}
	}
	for name := range doc.Comps.Schemas {
		if !strings.Contains(body, `id="schema-`+name+`"`) {
			t.Errorf("no schema %s", name)
		}
	}
	for name, r := range doc.Comps.Responses {
		for _, code := range r.Codes {
			if !strings.Contains(body, "<code>"+code+"</code>") {
				t.Errorf("response %s: error code %s not shown", name, code)
			}
		}
	}
	for _, w := range []string{`id="base-url"`, "Order of checks", "<ol><li>", escape(`"name": "Support assistant"`), `href="#schema-AgentRecordEnvelope"`} {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}

func escape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}

var attrURL = regexp.MustCompile(`(?i)\b(?:href|src|action|srcset|poster|data)\s*=\s*"([^"]*)"`)

// The page loads and links nothing from elsewhere and runs no script; its
// headers allow only this origin's styles.
func TestNoExternalURLsAndHeaders(t *testing.T) {
	h, err := apidocs.New(api.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, h, http.MethodGet, "/docs")
	body := rec.Body.String()
	for _, bad := range []string{"<script", "http://", "https://", "//cdn", " style=", "<iframe", "@import"} {
		if strings.Contains(strings.ToLower(body), bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	for _, m := range attrURL.FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(m[1], "#") && !(strings.HasPrefix(m[1], "/") && !strings.HasPrefix(m[1], "//")) {
			t.Errorf("a link or resource outside this origin: %q", m[0])
		}
	}
	hd := rec.Header()
	if ct := hd.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	csp := hd.Get("Content-Security-Policy")
	for _, w := range []string{"default-src 'none'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, w) {
			t.Errorf("CSP %q lacks %q", csp, w)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "script-src") || hd.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", hd)
	}
	css := get(t, h, http.MethodGet, apidocs.StylePath)
	if css.Code != http.StatusOK || css.Header().Get("Content-Type") != "text/css; charset=utf-8" || strings.Contains(css.Body.String(), "url(") {
		t.Errorf("stylesheet: %d %q", css.Code, css.Header().Get("Content-Type"))
	}
	if head := get(t, h, http.MethodHead, "/docs"); head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", head.Code, head.Body.Len())
	}
	if post := get(t, h, http.MethodPost, "/docs"); post.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", post.Code)
	}
	if other := get(t, h, http.MethodGet, "/docs/other"); other.Code != http.StatusNotFound {
		t.Errorf("GET /docs/other: %d", other.Code)
	}
}

// Text from the document is text: markup in a summary, a description, a
// name, an example or a server URL is shown escaped, and the descriptions'
// CommonMark subset becomes markup only through the renderer.
func TestEscapes(t *testing.T) {
	doc := `{"openapi":"3.1.0","info":{"title":"<b>T</b>","version":"1","description":"## H <i>\n\nPara with ` + "`<code>`" + ` and **bold** <script>alert(1)</script>\n\n- one <x>\n- two"},
	"servers":[{"url":"http://<evil>/v1"}],
	"tags":[{"name":"<tag>","description":"<img src=x>"}],
	"paths":{"/x/{id}":{"get":{"operationId":"get\"x","tags":["<tag>"],"summary":"<script>s</script>","description":"d <svg onload=1>",
	  "parameters":[{"name":"<pp>","in":"query","description":"<pp>","schema":{"type":"string"},"example":"<e>"}],
	  "responses":{"200":{"description":"<r>","content":{"application/json":{"schema":{"$ref":"#/components/schemas/S"},"example":{"k":"</pre><script>x</script>"}}}}}}}},
	"components":{"schemas":{"S":{"type":"object","description":"<s>","properties":{"<f>":{"type":"string","enum":["<v>"]}}}}}}`
	body := render(t, []byte(doc))
	for _, bad := range []string{"<script", "<img", "<svg", "<b>T", "<i>", "<evil>", "<pp>", "<e>", "<r>", "<s>", "<f>", "<v>", "<x>", "<tag>", `get"x`} {
		if strings.Contains(body, bad) {
			t.Errorf("the page contains %q unescaped", bad)
		}
	}
	for _, want := range []string{"<code>&lt;code&gt;</code>", "<strong>bold</strong>", "<h3>H &lt;i&gt;</h3>", "<li>one &lt;x&gt;</li>", `id="op-get-x"`, "&lt;/pre&gt;&lt;script&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if _, err := apidocs.New([]byte(strings.Replace(doc, "#/components/schemas/S", "#/components/schemas/Missing", 1))); err == nil {
		t.Error("a $ref to nothing was accepted")
	}
	if _, err := apidocs.New([]byte("not json")); err == nil {
		t.Error("a document that is not JSON was accepted")
	}
}
