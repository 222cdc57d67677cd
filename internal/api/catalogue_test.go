package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// hostile is one request of the catalogue, written as raw HTTP/1.1 so that
// odd encodings, repeated headers and broken framing reach the server as
// sent. want is the exact status; code the contract code ("" where net/http
// itself refuses the request before any handler runs).
type hostile struct {
	name   string
	raw    string // request line and headers, without the final CRLF CRLF; {KEY} and {ID}, {FOREIGN} are replaced
	body   string
	want   int
	code   domain.Code
	fields string // optional errors list, "field:code,…"
}

// leaks are what must never appear in a response body.
var leaks = regexp.MustCompile(`(?i)goroutine |\.go:\d+|panic|sqlite|pgx|postgres|sql:|runtime\.|SQLSTATE|stack|syntax error at`)

// randomValues are the fields whose values are random text (ids, key
// prefixes, cursors): "jpgx" in a prefix is no leak, so they are blanked
// before leaks is applied.
var randomValues = regexp.MustCompile(`"(id|prefix|existing_id|conversation_id|agent_id|next)":"[^"]*"`)

func TestHostileCatalogue(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 100_000 }, allAgentScopes...).Credential
	id := f.createAgent(key, "Target")
	other, owner := f.newAccount("Foreign")
	foreign := f.createAgent(f.keyIn(other, owner, nil, allAgentScopes...).Credential, "Foreign agent")
	srv := httptest.NewUnstartedServer(f.h)
	srv.Config.MaxHeaderBytes = 16 << 10 // as serve sets it
	srv.Start()
	defer srv.Close()

	auth := "Authorization: Bearer {KEY}"
	var cases []hostile
	cases = append(cases, catalogueWrongMethods(auth)...)
	cases = append(cases, catalogueOddPaths(auth)...)
	cases = append(cases, catalogueQueries(auth)...)
	cases = append(cases, catalogueAuthHeaders(auth)...)
	cases = append(cases, catalogueBodies(auth)...)
	cases = append(cases, catalogueFraming(auth)...)
	cases = append(cases, catalogueRefusedByHTTP(auth)...)

	if len(cases) < 150 {
		t.Fatalf("catalogue has %d requests, want at least 150", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := strings.NewReplacer("{KEY}", key, "{ID}", id, "{FOREIGN}", foreign).Replace(c.raw)
			catalogueCheck(t, srv.Listener.Addr().String(), raw, key, c)
		})
	}
	t.Logf("%d hostile requests", len(cases))
}

// catalogueContentJSON is the Content-Type header line of a JSON body.
const catalogueContentJSON = "Content-Type: application/json"

// catalogueWrongMethods is part 1 of the catalogue: wrong methods on every route, 404 after authentication.
func catalogueWrongMethods(auth string) []hostile {
	var cases []hostile
	routes := map[string][]string{
		"/v1/me": {"GET"}, "/v1/ai-agents": {"GET", "POST"}, "/v1/ai-agents/{ID}": {"GET", "PATCH"},
		"/v1/ai-agents/{ID}/enabled": {"PUT"}, "/v1/ai-agents/{ID}/stats": {"GET"}, "/v1/ai-agents/{ID}/questions": {"POST"},
	}
	for path, allowed := range routes {
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND", "FOO"} {
			if strings.Contains(strings.Join(allowed, " "), m) {
				continue
			}
			cases = append(cases, hostile{name: m + " " + path, raw: m + " " + path + " HTTP/1.1\r\n" + auth, want: 404, code: domain.CodeNotFound})
		}
	}
	return cases
}

// catalogueOddPaths is part 2: odd paths and encodings.
func catalogueOddPaths(auth string) []hostile {
	var cases []hostile
	for _, c := range []struct {
		path string
		want int
		code domain.Code
	}{
		{"/v1/me/", 404, domain.CodeNotFound}, {"/v1//me", 404, domain.CodeNotFound}, {"/v1/./me", 404, domain.CodeNotFound},
		{"/v1/ai-agents/../me", 404, domain.CodeNotFound}, {"/v1/ME", 404, domain.CodeNotFound}, {"/V1/me", 404, domain.CodeNotFound},
		{"//v1/me", 404, domain.CodeNotFound}, {"/v1/me%2F", 404, domain.CodeNotFound}, {"/v1/ai-agents%2F{ID}", 404, domain.CodeNotFound},
		{"/v1/ai-agents/%00", 404, domain.CodeNotFound}, {"/v1/ai-agents/" + strings.Repeat("a", 4000), 404, domain.CodeNotFound},
		{"/v1/ai-agents/%E2%80%AE", 404, domain.CodeNotFound}, {"/v1/ai-agents/%FF%FE", 404, domain.CodeNotFound},
		{"/v1/ai-agents/'%20OR%201=1--", 404, domain.CodeNotFound}, {"/v1/ai-agents/{FOREIGN}", 404, domain.CodeNotFound},
		{"/v1/ai-agents/{FOREIGN}/stats", 404, domain.CodeNotFound}, {"/v1/ai-agents/{ID}/stats/", 404, domain.CodeNotFound},
		{"/v1", 404, domain.CodeNotFound}, {"/v1/", 404, domain.CodeNotFound}, {"/", 404, domain.CodeNotFound},
		{"/v2/me", 404, domain.CodeNotFound}, {"/healthz/../v1/me", 404, domain.CodeNotFound},
		{"/v1/ai-agents/{ID}", 200, ""}, {"/v1/ai-agents/{ID}/stats", 200, ""}, {"/v1/%6De", 200, ""},
	} {
		cases = append(cases, hostile{name: "GET " + c.path, raw: "GET " + c.path + " HTTP/1.1\r\n" + auth, want: c.want, code: c.code})
	}
	return cases
}

// catalogueQueries is part 3: query strings.
func catalogueQueries(auth string) []hostile {
	var cases []hostile
	for _, c := range []struct {
		q      string
		want   int
		code   domain.Code
		fields string
	}{
		{"limit=5&limit=5", 400, domain.CodeInvalidValue, "limit:invalid_value"},
		{"next=a&next=a", 400, domain.CodeInvalidValue, "next:invalid_value"},
		{"limit=%00", 200, "", ""}, {"limit=-0", 200, "", ""}, {"limit=1%2B1", 200, "", ""}, {"limit=" + strings.Repeat("9", 5000), 200, "", ""},
		{"next='%20OR%201=1--", 400, domain.CodeInvalidValue, "next:invalid_value"},
		{"next=%00%00", 400, domain.CodeInvalidValue, "next:invalid_value"},
		{"updated_since=2026-13-01T00:00:00Z", 400, domain.CodeInvalidValue, "updated_since:invalid_value"},
		{"updated_since=2026-02-30T00:00:00Z", 400, domain.CodeInvalidValue, "updated_since:invalid_value"},
		{"updated_since=1e10", 400, domain.CodeInvalidValue, "updated_since:invalid_value"},
		{"updated_since=2026-01-01T00:00:00%2B25:00", 400, domain.CodeInvalidValue, "updated_since:invalid_value"},
		{"updated_since=9999-12-31T23:59:59Z", 200, "", ""}, {"updated_since=0001-01-01T00:00:00Z", 200, "", ""},
		{"updated_since=2026-01-01T00:00:00.123456789Z", 200, "", ""},
		{"LIMIT=5", 400, domain.CodeInvalidField, "LIMIT:invalid_field"},
		{"limit[]=5", 400, domain.CodeInvalidField, "limit[]:invalid_field"},
		{"%zz=1", 400, domain.CodeInvalidValue, "query:invalid_value"},
		{"a=1;b=2", 400, domain.CodeInvalidValue, "query:invalid_value"},
		{"=&&=", 400, domain.CodeInvalidField, ":invalid_field"},
		{"api_key={KEY}", 403, domain.CodeAccessDenied, ""}, {"Access_Token=x", 403, domain.CodeAccessDenied, ""},
		{"toKen", 403, domain.CodeAccessDenied, ""}, {"%61pikey=1", 403, domain.CodeAccessDenied, ""},
		{"x=1&authorization=Bearer%20{KEY}", 403, domain.CodeAccessDenied, ""},
	} {
		cases = append(cases, hostile{name: "query " + c.q, raw: "GET /v1/ai-agents?" + c.q + " HTTP/1.1\r\n" + auth, want: c.want, code: c.code, fields: c.fields})
	}
	return cases
}

// catalogueAuthHeaders is part 4: Authorization headers.
func catalogueAuthHeaders(auth string) []hostile {
	var cases []hostile
	for _, c := range []struct {
		name, headers string
		want          int
		code          domain.Code
	}{
		{"none", "", 401, domain.CodeInvalidCredentials},
		{"twice", auth + "\r\n" + auth, 401, domain.CodeInvalidCredentials},
		{"basic", "Authorization: Basic YTpi", 401, domain.CodeInvalidCredentials},
		{"token scheme", "Authorization: Token {KEY}", 401, domain.CodeInvalidCredentials},
		{"scheme only", "Authorization: Bearer", 401, domain.CodeInvalidCredentials},
		{"quoted", `Authorization: Bearer "{KEY}"`, 401, domain.CodeInvalidCredentials},
		{"two tokens", "Authorization: Bearer {KEY} {KEY}", 401, domain.CodeInvalidCredentials},
		{"sql", "Authorization: Bearer ' OR '1'='1", 401, domain.CodeInvalidCredentials},
		{"sql prefix", "Authorization: Bearer agk_live_'or'1'='1'_x", 401, domain.CodeInvalidCredentials},
		{"huge token", "Authorization: Bearer " + strings.Repeat("A", 15000), 401, domain.CodeInvalidCredentials},
		{"lowercase", "authorization: bearer {KEY}", 200, ""},
		{"extra spaces", "Authorization:    Bearer    {KEY}   ", 200, ""},
		{"utf-8", "Authorization: Bearer agk_live_ééééééé", 401, domain.CodeInvalidCredentials},
		{"empty value", "Authorization:", 401, domain.CodeInvalidCredentials},
		{"x-api-key instead", "X-Api-Key: {KEY}", 401, domain.CodeInvalidCredentials},
		{"cookie instead", "Cookie: token={KEY}", 401, domain.CodeInvalidCredentials},
	} {
		cases = append(cases, hostile{name: "auth " + c.name, raw: "GET /v1/me HTTP/1.1\r\n" + c.headers, want: c.want, code: c.code})
	}
	return cases
}

// catalogueBodies is part 5: bodies.
func catalogueBodies(auth string) []hostile {
	json := catalogueContentJSON
	var cases []hostile
	post := "POST /v1/ai-agents HTTP/1.1\r\n" + auth + "\r\n" + json
	put := "PUT /v1/ai-agents/{ID}/enabled HTTP/1.1\r\n" + auth + "\r\n" + json
	patch := "PATCH /v1/ai-agents/{ID} HTTP/1.1\r\n" + auth + "\r\n" + json
	for _, c := range []struct {
		name, raw, body string
		want            int
		code            domain.Code
		fields          string
	}{
		{"huge body", post, `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, 413, domain.CodeFileTooLarge, ""},
		{"just over 1 MiB", post, `{"name":"x","instructions":"` + strings.Repeat("b", 1<<20) + `"}`, 413, domain.CodeFileTooLarge, ""},
		{"deep arrays", post, `{"name":` + strings.Repeat("[", 50000) + strings.Repeat("]", 50000) + `}`, 400, domain.CodeInvalidJSON, ""},
		{"deep objects", post, strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000), 400, domain.CodeInvalidJSON, ""},
		{"deep but valid", post, `{"name":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400, domain.CodeDatatypeMismatch, "name:datatype_mismatch"},
		{"invalid utf-8", post, "{\"name\":\"\xc3\x28\"}", 400, domain.CodeInvalidJSON, ""},
		{"overlong utf-8", post, "{\"name\":\"\xc0\xaf\"}", 400, domain.CodeInvalidJSON, ""},
		{"utf-16", post, "\xff\xfe{\x00}\x00", 400, domain.CodeInvalidJSON, ""},
		{"bom", post, "\xef\xbb\xbf{\"name\":\"x\"}", 400, domain.CodeInvalidJSON, ""},
		{"NUL escape", post, `{"name":"a\u0000b"}`, 400, domain.CodeInvalidValue, "name:invalid_value"},
		{"raw NUL", post, "{\"name\":\"a\x00b\"}", 400, domain.CodeInvalidJSON, ""},
		{"lone surrogate", post, `{"name":"\ud800"}`, 400, domain.CodeInvalidValue, "name:invalid_value"}, // would be stored as U+FFFD
		{"number overflow", post, `{"name":1e400}`, 400, domain.CodeDatatypeMismatch, "name:datatype_mismatch"},
		{"big int", post, `{"name":123456789012345678901234567890}`, 400, domain.CodeDatatypeMismatch, "name:datatype_mismatch"},
		{"enabled big number", put, `{"enabled":1e308}`, 400, domain.CodeInvalidValue, "enabled:invalid_value"},
		{"enabled string", put, `{"enabled":"TRUE"}`, 400, domain.CodeInvalidValue, "enabled:invalid_value"},
		{"enabled array", put, `{"enabled":[true]}`, 400, domain.CodeInvalidValue, "enabled:invalid_value"},
		{"enabled object", put, `{"enabled":{}}`, 400, domain.CodeInvalidValue, "enabled:invalid_value"},
		{"sql name", post, `{"name":"'; DROP TABLE agents; --"}`, 201, "", ""},
		{"sql name 2", post, `{"name":"Robert\"); DELETE FROM api_keys WHERE (\"1\"=\"1"}`, 201, "", ""},
		{"html name", post, `{"name":"<script>alert(1)</script>"}`, 201, "", ""},
		{"200 emoji", post, `{"name":"` + strings.Repeat("😀", 200) + `"}`, 201, "", ""},
		{"201 emoji", post, `{"name":"` + strings.Repeat("😀", 201) + `"}`, 400, domain.CodeInvalidValue, "name:invalid_value"},
		{"rtl override", post, `{"name":"a\u202eb"}`, 201, "", ""},
		{"DEL char", post, "{\"name\":\"a\x7fb\"}", 400, domain.CodeInvalidValue, "name:invalid_value"},
		{"C1 control", post, `{"name":"a\u0085b"}`, 400, domain.CodeInvalidValue, "name:invalid_value"},
		{"newline in name", post, `{"name":"a\nb"}`, 400, domain.CodeInvalidValue, "name:invalid_value"},
		{"duplicate key", post, `{"name":"a","name":"a"}`, 400, domain.CodeInvalidJSON, ""},
		{"duplicate escaped key", post, `{"name":"a","n\u0061me":"b"}`, 400, domain.CodeInvalidJSON, ""},
		{"prototype pollution", post, `{"__proto__":{"admin":true},"name":"p"}`, 400, domain.CodeInvalidField, "__proto__:invalid_field"},
		{"id smuggled", post, `{"name":"s","id":"agt_mine"}`, 400, domain.CodeInvalidField, "id:invalid_field"},
		{"account smuggled", post, `{"name":"s","account_id":"x"}`, 400, domain.CodeInvalidField, "account_id:invalid_field"},
		{"trailing comma", post, `{"name":"x",}`, 400, domain.CodeInvalidJSON, ""},
		{"single quotes", post, `{'name':'x'}`, 400, domain.CodeInvalidJSON, ""},
		{"comment", post, `{"name":"x"/*c*/}`, 400, domain.CodeInvalidJSON, ""},
		{"NaN", post, `{"name":NaN}`, 400, domain.CodeInvalidJSON, ""},
		{"two objects", post, `{"name":"x"}{"name":"y"}`, 400, domain.CodeInvalidJSON, ""},
		{"whitespace only", post, "   \n\t ", 400, domain.CodeInvalidJSON, ""},
		{"number body", post, `42`, 400, domain.CodeInvalidJSON, ""},
		{"patch enabled", patch, `{"enabled":false}`, 400, domain.CodeInvalidField, "enabled:invalid_field"},
		{"patch null name", patch, `{"name":null}`, 200, "", ""},
		{"patch foreign", strings.Replace(patch, "{ID}", "{FOREIGN}", 1), `{"name":"mine now"}`, 404, domain.CodeNotFound, ""},
		{"put foreign", strings.Replace(put, "{ID}", "{FOREIGN}", 1), `{"enabled":false}`, 404, domain.CodeNotFound, ""},
		{"ask foreign", "POST /v1/ai-agents/{FOREIGN}/questions HTTP/1.1\r\n" + auth + "\r\n" + json, `{"question":"hi"}`, 404, domain.CodeNotFound, ""},
	} {
		cases = append(cases, hostile{name: "body " + c.name, raw: c.raw, body: c.body, want: c.want, code: c.code, fields: c.fields})
	}
	return cases
}

// catalogueFraming is part 6: content types and framing.
func catalogueFraming(auth string) []hostile {
	json := catalogueContentJSON
	var cases []hostile
	for _, c := range []struct {
		name, headers, body string
		want                int
		code                domain.Code
	}{
		{"no content type", "", `{"name":"ct0"}`, 415, domain.CodeUnsupportedType},
		{"text/plain", "Content-Type: text/plain", `{"name":"ct1"}`, 415, domain.CodeUnsupportedType},
		{"json-patch", "Content-Type: application/json-patch+json", `{"name":"ct2"}`, 415, domain.CodeUnsupportedType},
		{"multipart", "Content-Type: multipart/form-data; boundary=x", "--x--", 415, domain.CodeUnsupportedType},
		{"two content types", json + "\r\n" + json, `{"name":"ct3"}`, 415, domain.CodeUnsupportedType},
		{"garbage content type", "Content-Type: ;;;", `{"name":"ct4"}`, 415, domain.CodeUnsupportedType},
		{"upper case", "Content-Type: APPLICATION/JSON", `{"name":"ct5"}`, 201, ""},
		{"charset", "Content-Type: application/json; charset=UTF-8", `{"name":"ct6"}`, 201, ""},
		{"content-length lies short", json + "\r\nContent-Length: 5", `{"name":"ct7"}`, 400, domain.CodeInvalidJSON},
		{"chunked", json + "\r\nTransfer-Encoding: chunked", "e\r\n{\"name\":\"ct8\"}\r\n0\r\n\r\n", 201, ""},
		{"expect continue", json + "\r\nExpect: 100-continue", `{"name":"ct9"}`, 201, ""},
		// RFC 9112: chunked wins over a Content-Length sent with it.
		{"length and chunked", json + "\r\nContent-Length: 3\r\nTransfer-Encoding: chunked", "f\r\n{\"name\":\"ct10\"}\r\n0\r\n\r\n", 201, ""},
	} {
		cases = append(cases, hostile{name: "framing " + c.name, raw: "POST /v1/ai-agents HTTP/1.1\r\n" + auth + "\r\n" + c.headers, body: c.body, want: c.want, code: c.code})
	}
	return cases
}

// catalogueRefusedByHTTP is part 7: requests net/http refuses itself, before any handler: 400 or 431, never a hang or a 500.
func catalogueRefusedByHTTP(auth string) []hostile {
	var cases []hostile
	for _, c := range []struct {
		name, raw string
		want      int
	}{
		{"header too large", "GET /v1/me HTTP/1.1\r\n" + auth + "\r\nX-Big: " + strings.Repeat("x", 1<<20), 431},
		{"NUL in header", "GET /v1/me HTTP/1.1\r\nX-A: a\x00b\r\n" + auth, 400},
		{"bad request line", "GET /v1/me HTTP/9.9\r\n" + auth, 505},
		{"space in path", "GET /v1/m e HTTP/1.1\r\n" + auth, 400},
		{"two content lengths", "POST /v1/ai-agents HTTP/1.1\r\n" + auth + "\r\nContent-Length: 3\r\nContent-Length: 4", 400},
		{"no host", "GET /v1/me HTTP/1.1\r\nX-No-Host: 1\r\n" + auth, 400},
	} {
		cases = append(cases, hostile{name: "http " + c.name, raw: c.raw, want: c.want})
	}
	return cases
}

// catalogueCheck sends one request of the catalogue (raw with its
// placeholders replaced) and checks the reply: status, no internals, no
// echoed credential and, where a handler answered, the JSON error envelope.
func catalogueCheck(t *testing.T, addr, raw, key string, c hostile) {
	t.Helper()
	status, hdr, body := sendRaw(t, addr, raw, c.body)
	if status != c.want {
		t.Fatalf("status %d, want %d; body %.300s", status, c.want, body)
	}
	if leaks.MatchString(randomValues.ReplaceAllString(body, `"$1":""`)) {
		t.Fatalf("internals in the response: %.300s", body)
	}
	if strings.Contains(body, key) {
		t.Fatal("the credential is echoed")
	}
	if c.code == "" && c.want >= 400 {
		return // refused by net/http itself
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if c.want < 400 {
		return
	}
	catalogueWantErrorBody(t, status, body, c)
}

// catalogueWantErrorBody checks an error reply's envelope against the case;
// a case without fields accepts whatever errors list the body carries.
func catalogueWantErrorBody(t *testing.T, status int, body string, c hostile) {
	t.Helper()
	rec := &response{ResponseRecorder: httptest.NewRecorder()}
	rec.Code = status
	rec.Body.WriteString(body)
	if err := jsonUnmarshal(body, &rec.body); err != nil {
		t.Fatalf("body not JSON: %.300s", body)
	}
	var fields []string
	if c.fields != "" {
		fields = strings.Split(c.fields, ",")
	}
	if c.fields == "" {
		fields = append(fields, catalogueErrorFields(rec.body)...)
	}
	rec.wantError(t, c.want, c.code, fields...)
}

// catalogueErrorFields lists a body's error.errors as "field:code".
func catalogueErrorFields(body map[string]any) []string {
	var fields []string
	if e, _ := body["error"].(map[string]any); e != nil {
		if list, ok := e["errors"].([]any); ok {
			for _, it := range list {
				m := it.(map[string]any)
				fields = append(fields, m["field"].(string)+":"+m["code"].(string))
			}
		}
	}
	return fields
}

// sendRaw writes one raw request on a fresh connection and reads the reply.
func sendRaw(t *testing.T, addr, head, body string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if !strings.Contains(strings.ToLower(head), "\r\nhost:") && !strings.Contains(head, "X-No-Host") {
		head = strings.Replace(head, "\r\n", "\r\nHost: api.test\r\n", 1)
	}
	head = strings.Replace(head, "X-No-Host: 1\r\n", "", 1)
	lower := strings.ToLower(head)
	if body != "" && !strings.Contains(lower, "content-length:") && !strings.Contains(lower, "transfer-encoding:") {
		head += fmt.Sprintf("\r\nContent-Length: %d", len(body))
	}
	head = strings.TrimRight(head, "\r\n") + "\r\nConnection: close\r\n\r\n"
	go func() { _, _ = io.WriteString(conn, head+body) }()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode/100 == 1 { // 100 Continue precedes the answer
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}
