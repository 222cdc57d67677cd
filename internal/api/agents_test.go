package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

func TestCreateAgent(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		r := f.send("POST", "/v1/ai-agents", key, `{"name":"  Support Bot  "}`)
		r.wantStatus(t, http.StatusCreated)
		d := r.data()
		id := d["id"].(string)
		if r.Header().Get("Location") != "/v1/ai-agents/"+id {
			t.Fatalf("Location %q", r.Header().Get("Location"))
		}
		want := map[string]any{
			"id": id, "name": "Support Bot", "enabled": true, "created_at": "2026-11-22T12:00:00.000Z",
			"instructions": "", "updated_at": "2026-11-22T12:00:00.000Z",
		}
		if len(d) != len(want) {
			t.Fatalf("agent record %v, want fields %v", d, want)
		}
		for k, v := range want {
			if d[k] != v {
				t.Errorf("%s = %v, want %v", k, d[k], v)
			}
		}
		// Case-insensitive, trimmed uniqueness: 409 with the holder's id.
		for _, name := range []string{"Support Bot", "support bot", " SUPPORT BOT\t"} {
			r := f.send("POST", "/v1/ai-agents", key, `{"name":`+quote(name)+`}`)
			r.wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
			if r.body["error"].(map[string]any)["existing_id"] != id {
				t.Fatalf("existing_id %v, want %s", r.body["error"], id)
			}
		}
		// The same name in another account is fine.
		other, owner := f.newAccount("Other")
		f.send("POST", "/v1/ai-agents", f.keyIn(other, owner, nil, allAgentScopes...).Credential, `{"name":"Support Bot"}`).wantStatus(t, 201)
		// With instructions.
		r = f.send("POST", "/v1/ai-agents", key, `{"name":"Doc","instructions":"Answer briefly.\nBe kind."}`)
		r.wantStatus(t, 201)
		if r.data()["instructions"] != "Answer briefly.\nBe kind." {
			t.Fatalf("instructions %v", r.data()["instructions"])
		}
	})
}

func TestConcurrentDuplicateCreates(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		const n = 16
		var wg sync.WaitGroup
		results := make([]*response, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = f.send("POST", "/v1/ai-agents", key, fmt.Sprintf(`{"name":"Racer %s"}`, strings.Repeat(" ", i%3)))
			}()
		}
		wg.Wait()
		winner := duplicateCreatesWinner(t, results)
		duplicateCreatesLosers(t, results, winner)
		if n := len(f.get("/v1/ai-agents", key).body["data"].([]any)); n != 1 {
			t.Fatalf("%d agents stored, want 1", n)
		}
	})
}

// duplicateCreatesWinner returns the id of the one create that succeeded,
// failing when none or two did.
func duplicateCreatesWinner(t *testing.T, results []*response) string {
	t.Helper()
	var winner string
	for _, r := range results {
		if r.Code == 201 {
			if winner != "" {
				t.Fatal("two creates of one name both succeeded")
			}
			winner = r.data()["id"].(string)
		}
	}
	if winner == "" {
		t.Fatal("no create succeeded")
	}
	return winner
}

// duplicateCreatesLosers checks that every other create got 409 naming the
// winner.
func duplicateCreatesLosers(t *testing.T, results []*response, winner string) {
	t.Helper()
	for _, r := range results {
		if r.Code != 201 {
			r.wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
			if got := r.body["error"].(map[string]any)["existing_id"]; got != winner {
				t.Fatalf("existing_id %v, want winner %s", got, winner)
			}
		}
	}
}

func TestSetEnabled(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		id := f.createAgent(key, "Toggle")
		f.clock.Advance(time.Second)
		r := f.send("PUT", "/v1/ai-agents/"+id+"/enabled", key, `{"enabled":false}`)
		r.wantStatus(t, 200)
		if r.data()["enabled"] != false || r.data()["updated_at"] != "2026-11-22T12:00:01.000Z" {
			t.Fatalf("after disable: %v", r.data())
		}
		// Setting the value it already has succeeds and changes nothing.
		f.clock.Advance(time.Second)
		r = f.send("PUT", "/v1/ai-agents/"+id+"/enabled", key, `{"enabled":false}`)
		r.wantStatus(t, 200)
		if r.data()["updated_at"] != "2026-11-22T12:00:01.000Z" {
			t.Fatalf("a no-op moved updated_at: %v", r.data())
		}
		// Disabled agents are kept and listed.
		list := f.get("/v1/ai-agents", key).body["data"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["enabled"] != false {
			t.Fatalf("list %v", list)
		}
		r = f.send("PUT", "/v1/ai-agents/"+id+"/enabled", key, `{"enabled":true}`)
		r.wantStatus(t, 200)
		if r.data()["enabled"] != true {
			t.Fatalf("after enable: %v", r.data())
		}
		f.get("/v1/ai-agents/"+id, key).wantStatus(t, 200)
	})
}

func TestValidation(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	id := f.createAgent(key, "Existing")
	long := strings.Repeat("é", domain.MaxAgentNameLength)
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            domain.Code
		fields                          []string
	}{
		{"missing name", "POST", "/v1/ai-agents", "", `{}`, 400, domain.CodeMissingField, []string{"name:missing_field"}},
		{"null name", "POST", "/v1/ai-agents", "", `{"name":null}`, 400, domain.CodeMissingField, []string{"name:missing_field"}},
		{"number name", "POST", "/v1/ai-agents", "", `{"name":42}`, 400, domain.CodeDatatypeMismatch, []string{"name:datatype_mismatch"}},
		{"array name", "POST", "/v1/ai-agents", "", `{"name":["a"]}`, 400, domain.CodeDatatypeMismatch, []string{"name:datatype_mismatch"}},
		{"blank name", "POST", "/v1/ai-agents", "", `{"name":"  \t "}`, 400, domain.CodeInvalidValue, []string{"name:invalid_value"}},
		{"long name", "POST", "/v1/ai-agents", "", `{"name":"` + long + `x"}`, 400, domain.CodeInvalidValue, []string{"name:invalid_value"}},
		{"control char", "POST", "/v1/ai-agents", "", `{"name":"a\u0007b"}`, 400, domain.CodeInvalidValue, []string{"name:invalid_value"}},
		{"NUL", "POST", "/v1/ai-agents", "", `{"name":"a\u0000b"}`, 400, domain.CodeInvalidValue, []string{"name:invalid_value"}},
		{"unknown attribute", "POST", "/v1/ai-agents", "", `{"name":"x","color":"red"}`, 400, domain.CodeInvalidField, []string{"color:invalid_field"}},
		{"case-sensitive names", "POST", "/v1/ai-agents", "", `{"Name":"x"}`, 400, domain.CodeInvalidField, []string{"Name:invalid_field", "name:missing_field"}},
		{"enabled not on create", "POST", "/v1/ai-agents", "", `{"name":"x","enabled":false}`, 400, domain.CodeInvalidField, []string{"enabled:invalid_field"}},
		{"all of them", "POST", "/v1/ai-agents?x=1", "", `{"a":1,"name":5}`, 400, domain.CodeInvalidField, []string{"x:invalid_field", "a:invalid_field", "name:datatype_mismatch"}},
		{"duplicate attribute", "POST", "/v1/ai-agents", "", `{"name":"a","name":"b"}`, 400, domain.CodeInvalidJSON, []string{"name:invalid_json"}},
		{"duplicates listed once each", "POST", "/v1/ai-agents", "", `{"name":"a","x":1,"name":"b","x":2,"name":"c"}`, 400, domain.CodeInvalidJSON, []string{"name:invalid_json", "x:invalid_json"}},
		{"duplicate after unknown query", "POST", "/v1/ai-agents?bar=1", "", `{"name":"a","name":"b"}`, 400, domain.CodeInvalidField, []string{"bar:invalid_field", "name:invalid_json"}},
		{"duplicate in broken json", "POST", "/v1/ai-agents", "", `{"name":"a","name":"b",}`, 400, domain.CodeInvalidJSON, nil},
		{"unparseable", "POST", "/v1/ai-agents", "", `{"name":`, 400, domain.CodeInvalidJSON, nil},
		{"empty body", "POST", "/v1/ai-agents", "application/json", ``, 400, domain.CodeInvalidJSON, nil},
		{"array body", "POST", "/v1/ai-agents", "", `[{"name":"x"}]`, 400, domain.CodeInvalidJSON, nil},
		{"string body", "POST", "/v1/ai-agents", "", `"x"`, 400, domain.CodeInvalidJSON, nil},
		{"null body", "POST", "/v1/ai-agents", "", `null`, 400, domain.CodeInvalidJSON, nil},
		{"trailing data", "POST", "/v1/ai-agents", "", `{"name":"x"} {}`, 400, domain.CodeInvalidJSON, nil},
		{"invalid utf-8", "POST", "/v1/ai-agents", "", "{\"name\":\"\xff\"}", 400, domain.CodeInvalidJSON, nil},
		{"unknown query before body", "POST", "/v1/ai-agents?x=1", "", `{`, 400, domain.CodeInvalidField, []string{"x:invalid_field"}},
		{"text/plain", "POST", "/v1/ai-agents", "text/plain", `{"name":"x"}`, 415, domain.CodeUnsupportedType, nil},
		{"no content type", "POST", "/v1/ai-agents", "<delete>", `{"name":"x"}`, 415, domain.CodeUnsupportedType, nil},
		{"form", "POST", "/v1/ai-agents", "application/x-www-form-urlencoded", `name=x`, 415, domain.CodeUnsupportedType, nil},
		{"charset allowed", "POST", "/v1/ai-agents", "application/json; charset=utf-8", `{"name":"charset ok"}`, 201, "", nil},
		{"too large", "POST", "/v1/ai-agents", "", `{"name":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, domain.CodeFileTooLarge, nil},
		{"enabled missing", "PUT", "/v1/ai-agents/" + id + "/enabled", "", `{}`, 400, domain.CodeMissingField, []string{"enabled:missing_field"}},
		{"enabled string", "PUT", "/v1/ai-agents/" + id + "/enabled", "", `{"enabled":"false"}`, 400, domain.CodeInvalidValue, []string{"enabled:invalid_value"}},
		{"enabled number", "PUT", "/v1/ai-agents/" + id + "/enabled", "", `{"enabled":0}`, 400, domain.CodeInvalidValue, []string{"enabled:invalid_value"}},
		{"enabled null", "PUT", "/v1/ai-agents/" + id + "/enabled", "", `{"enabled":null}`, 400, domain.CodeInvalidValue, []string{"enabled:invalid_value"}},
		{"enabled extra", "PUT", "/v1/ai-agents/" + id + "/enabled", "", `{"enabled":true,"name":"x"}`, 400, domain.CodeInvalidField, []string{"name:invalid_field"}},
		{"validation before 404", "PUT", "/v1/ai-agents/agt_none/enabled", "", `{"enabled":1}`, 400, domain.CodeInvalidValue, []string{"enabled:invalid_value"}},
		{"404 after validation", "PUT", "/v1/ai-agents/agt_none/enabled", "", `{"enabled":true}`, 404, domain.CodeNotFound, nil},
		{"me takes no query", "GET", "/v1/me?verbose=1", "", ``, 400, domain.CodeInvalidField, []string{"verbose:invalid_field"}},
		{"repeated parameter", "GET", "/v1/ai-agents?limit=5&limit=6", "", ``, 400, domain.CodeInvalidValue, []string{"limit:invalid_value"}},
		{"unknown and repeated", "GET", "/v1/ai-agents?limit=5&limit=6&z=1", "", ``, 400, domain.CodeInvalidField, []string{"z:invalid_field", "limit:invalid_value"}},
		{"bad updated_since", "GET", "/v1/ai-agents?updated_since=yesterday", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		{"date only", "GET", "/v1/ai-agents?updated_since=2026-01-01", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		{"no zone", "GET", "/v1/ai-agents?updated_since=2026-01-01T00:00:00", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		// time.Parse takes these; RFC 3339 does not.
		{"offset hour 24", "GET", "/v1/ai-agents?updated_since=2026-01-01T00:00:00%2B24:00", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		{"offset minute 60", "GET", "/v1/ai-agents?updated_since=2026-01-01T00:00:00%2B23:60", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		{"comma fraction", "GET", "/v1/ai-agents?updated_since=2026-01-01T00:00:00,5Z", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		{"empty fraction", "GET", "/v1/ai-agents?updated_since=2026-01-01T00:00:00.Z", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		{"no calendar day", "GET", "/v1/ai-agents?updated_since=2026-02-30T00:00:00Z", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value"}},
		// RFC 3339 allows these; time.Parse refuses the lower case.
		{"lower-case t and z", "GET", "/v1/ai-agents?updated_since=2026-01-01t00:00:00z", "", ``, 200, "", nil},
		{"long fraction", "GET", "/v1/ai-agents?updated_since=2026-01-01T00:00:00.1234567891234%2B23:59", "", ``, 200, "", nil},
		{"bad filter and bad cursor", "GET", "/v1/ai-agents?updated_since=x&next=garbage", "", ``, 400, domain.CodeInvalidValue, []string{"updated_since:invalid_value", "next:invalid_value"}},
		{"bad escape", "GET", "/v1/ai-agents?limit=%zz", "", ``, 400, domain.CodeInvalidValue, []string{"query:invalid_value"}},
		{"parameter name not UTF-8", "GET", "/v1/me?%FF=1", "", ``, 400, domain.CodeInvalidField, []string{"\uFFFD:invalid_field"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var headers []string
			if c.ctype != "" {
				headers = []string{"Content-Type: " + c.ctype}
			}
			r := f.do(req{method: c.method, path: c.path, key: key, body: c.body, headers: headers})
			if c.code == "" {
				r.wantStatus(t, c.status)
				return
			}
			r.wantError(t, c.status, c.code, c.fields...)
		})
	}
	// The message counts the other problems, in good grammar.
	for path, want := range map[string]string{
		"/v1/ai-agents?limit=5&limit=6&z=1":     "(and 1 more problem; see errors)",
		"/v1/ai-agents?limit=5&limit=6&z=1&y=2": "(and 2 more problems; see errors)",
	} {
		if m := f.get(path, key).message(); !strings.Contains(m, want) {
			t.Errorf("%s: message %q, want it to end %q", path, m, want)
		}
	}
	// Nothing invalid was stored.
	if n := len(f.get("/v1/ai-agents", key).body["data"].([]any)); n != 2 {
		t.Fatalf("%d agents, want 2", n)
	}
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]int{
		"": 30, "1": 1, "30": 30, "99": 99, "100": 100, "101": 100, "007": 7, "0100": 100,
		"99999999999999999999999999": 100, "0": 30, "000": 30, "-1": 30, "+5": 30, "5.0": 30,
		"1e2": 30, "abc": 30, " 5": 30, "5 ": 30, "٣": 30, "0x10": 30,
	} {
		if got := parseLimit(in, true); got != want {
			t.Errorf("parseLimit(%q) = %d, want %d", in, got, want)
		}
	}
	if parseLimit("", false) != 30 {
		t.Error("absent limit is not 30")
	}
}

func TestListPagination(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		ids := listPaginationSeed(f, key)
		// Walk with limit 7: 4 pages, following next while has_more.
		got, pages := listPaginationWalk(t, f, key)
		// Oldest first; agents created in one millisecond are ordered by id.
		ids = slices.Sorted(slices.Values(ids))
		if pages != 4 || strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Fatalf("walk: %d pages, ids %v, want %v", pages, got, ids)
		}
		// limit may change between pages.
		r := f.get("/v1/ai-agents?limit=10", key)
		next := r.body["meta"].(map[string]any)["next"].(string)
		r = f.get("/v1/ai-agents?limit=100&next="+next, key)
		if n := len(r.body["data"].([]any)); n != 15 {
			t.Fatalf("second page has %d, want 15", n)
		}
		// Clamping and fallback are reflected in meta.limit.
		listPaginationClamping(t, f, key)
		// Exactly one page: has_more false on a full page at the end.
		r = f.get("/v1/ai-agents?limit=25", key)
		if m := r.body["meta"].(map[string]any); m["has_more"] != false || m["next"] != nil {
			t.Fatalf("exact page meta %v", m)
		}
	})
}

// listPaginationSeed creates 25 agents, some sharing a millisecond, and
// returns their ids in creation order.
func listPaginationSeed(f *fixture, key string) []string {
	var ids []string
	for i := range 25 {
		ids = append(ids, f.createAgent(key, fmt.Sprintf("agent %02d", i)))
		if i%4 == 0 { // some share a millisecond: ties are ordered by id
			f.clock.Advance(time.Millisecond)
		}
	}
	return ids
}

// listPaginationWalk lists with limit 7, following next while has_more, and
// returns the ids seen in order and the number of pages.
func listPaginationWalk(t *testing.T, f *fixture, key string) ([]string, int) {
	t.Helper()
	var got []string
	next, pages := "", 0
	for {
		path := "/v1/ai-agents?limit=7"
		if next != "" {
			path += "&next=" + next
		}
		r := f.get(path, key)
		r.wantStatus(t, 200)
		pages++
		m := r.body["meta"].(map[string]any)
		if len(m) != 3 || m["limit"] != float64(7) {
			t.Fatalf("meta %v", m)
		}
		got = append(got, listPaginationItemIDs(t, r)...)
		if m["has_more"] == false {
			if m["next"] != nil {
				t.Fatalf("has_more false with next %v", m["next"])
			}
			break
		}
		next = m["next"].(string)
	}
	return got, pages
}

// listPaginationItemIDs checks that every item of a page has the contract's
// 4 fields and returns their ids.
func listPaginationItemIDs(t *testing.T, r *response) []string {
	t.Helper()
	var ids []string
	for _, it := range r.body["data"].([]any) {
		item := it.(map[string]any)
		if len(item) != 4 {
			t.Fatalf("list item has %d fields, want the contract's 4: %v", len(item), item)
		}
		ids = append(ids, item["id"].(string))
	}
	return ids
}

// listPaginationClamping checks that clamping and fallback of limit are
// reflected in meta.limit.
func listPaginationClamping(t *testing.T, f *fixture, key string) {
	t.Helper()
	for q, want := range map[string]float64{"": 30, "?limit=1000": 100, "?limit=0": 30, "?limit=-3": 30, "?limit=2.5": 30, "?limit=abc": 30} {
		m := f.get("/v1/ai-agents"+q, key).body["meta"].(map[string]any)
		if m["limit"] != want {
			t.Errorf("%s: meta.limit %v, want %v", q, m["limit"], want)
		}
	}
}

func TestEmptyList(t *testing.T) {
	f := newFixture(t, "sqlite")
	r := f.get("/v1/ai-agents", f.key(domain.ScopeAgentsRead))
	r.wantStatus(t, 200)
	if r.Body.String() != `{"data":[],"meta":{"limit":30,"next":null,"has_more":false}}`+"\n" {
		t.Fatalf("empty list body %s", r.Body.String())
	}
}

func TestCursorMisuse(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	for i := range 5 {
		f.createAgent(key, fmt.Sprintf("c%d", i))
	}
	next := f.get("/v1/ai-agents?limit=2", key).body["meta"].(map[string]any)["next"].(string)
	filtered := f.get("/v1/ai-agents?limit=2&updated_since=2020-01-01T00:00:00Z", key).body["meta"].(map[string]any)["next"].(string)
	other, owner := f.newAccount("Other")
	otherKey := f.keyIn(other, owner, nil, allAgentScopes...).Credential
	tampered := []byte(next)
	tampered[5] ^= 1
	for name, path := range map[string]string{
		"tampered":              "/v1/ai-agents?next=" + string(tampered),
		"garbage":               "/v1/ai-agents?next=hello",
		"empty":                 "/v1/ai-agents?next=",
		"huge":                  "/v1/ai-agents?next=" + strings.Repeat("A", 5000),
		"other filter":          "/v1/ai-agents?updated_since=2021-01-01T00:00:00Z&next=" + next,
		"filter dropped":        "/v1/ai-agents?next=" + filtered,
		"filter changed":        "/v1/ai-agents?updated_since=2020-01-01T00:00:01Z&next=" + filtered,
		"truncated":             "/v1/ai-agents?next=" + next[:len(next)-3],
		"other account (below)": "",
	} {
		if path == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			f.get(path, key).wantError(t, 400, domain.CodeInvalidValue, "next:invalid_value")
		})
	}
	f.get("/v1/ai-agents?next="+next, otherKey).wantError(t, 400, domain.CodeInvalidValue, "next:invalid_value")
	// Under an invalid filter a well-formed cursor cannot be checked: only
	// the filter is reported.
	f.get("/v1/ai-agents?updated_since=yesterday&next="+filtered, key).wantError(t, 400, domain.CodeInvalidValue, "updated_since:invalid_value")
	// The same filter spelled another way (offset instead of Z) is the same filter.
	f.get("/v1/ai-agents?updated_since=2020-01-01T01:00:00%2B01:00&next="+filtered, key).wantStatus(t, 200)
	f.get("/v1/ai-agents?next="+next, key).wantStatus(t, 200)
}

func TestUpdatedSince(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		a := f.createAgent(key, "a")
		f.clock.Advance(time.Minute)
		b := f.createAgent(key, "b")
		f.clock.Advance(time.Minute)
		// A change moves a into the window too.
		f.send("PUT", "/v1/ai-agents/"+a+"/enabled", key, `{"enabled":false}`).wantStatus(t, 200)
		ids := func(q string) string {
			var out []string
			for _, it := range f.get("/v1/ai-agents"+q, key).body["data"].([]any) {
				out = append(out, it.(map[string]any)["id"].(string))
			}
			return strings.Join(out, ",")
		}
		if got := ids("?updated_since=2026-11-22T12:01:00Z"); got != a+","+b {
			t.Fatalf("since 12:01 (inclusive): %s", got)
		}
		if got := ids("?updated_since=2026-11-22T12:01:00.001Z"); got != a {
			t.Fatalf("since 12:01:00.001: %s", got)
		}
		if got := ids("?updated_since=2026-11-22T14:01:30%2B02:00"); got != a {
			t.Fatalf("offset form: %s", got)
		}
		if got := ids("?updated_since=2030-01-01T00:00:00Z"); got != "" {
			t.Fatalf("future: %s", got)
		}
	})
}

// TestSurrogateEscapes: an escaped UTF-16 surrogate that is not half of a
// pair is refused, where encoding/json alone would store U+FFFD instead of
// what was sent; pairs, a literal U+FFFD and an escaped backslash are text.
func TestSurrogateEscapes(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	for _, body := range []string{
		`{"name":"inv\ud800x"}`, `{"name":"\udc00"}`, `{"name":"a\uD800\u0041"}`, `{"name":"\ud800"}`,
		`{"name":"\ud800\ud800"}`, `{"name":"x","instructions":"\udfff"}`,
	} {
		field := "name"
		if strings.Contains(body, "instructions") {
			field = "instructions"
		}
		f.send("POST", "/v1/ai-agents", key, body).wantError(t, 400, domain.CodeInvalidValue, field+":invalid_value")
	}
	for body, want := range map[string]string{
		`{"name":"smile \ud83d\ude00"}`: "smile 😀",
		`{"name":"\\ud800 text"}`:       `\ud800 text`,
		`{"name":"literal �"}`:          "literal \uFFFD",
		`{"name":"\\\ud83d\ude01"}`:     `\😁`,
	} {
		r := f.send("POST", "/v1/ai-agents", key, body)
		r.wantStatus(t, 201)
		if got := r.data()["name"]; got != want {
			t.Fatalf("%s: name %q, want %q", body, got, want)
		}
	}
	// Everywhere a string attribute is read: PATCH too.
	id := f.createAgent(key, "patched")
	f.send("PATCH", "/v1/ai-agents/"+id, key, `{"instructions":"a\ud800"}`).wantError(t, 400, domain.CodeInvalidValue, "instructions:invalid_value")
}

// TestContentEncoding: a compressed body is 415, whatever it holds; the
// identity coding is no coding.
func TestContentEncoding(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(allAgentScopes...)
	for _, enc := range []string{"gzip", "deflate, gzip", "identity, br", "x-unknown"} {
		r := f.do(req{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"zipped"}`, headers: []string{"Content-Encoding: " + enc}})
		r.wantError(t, 415, domain.CodeUnsupportedType)
	}
	f.do(req{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"plain"}`, headers: []string{"Content-Encoding: identity"}}).wantStatus(t, 201)
}

// TestIDsThatAreNotText: an id in the path (or a conversation id) that is
// not valid UTF-8, or holds NUL, names no record: 404 on both engines.
// PostgreSQL refuses such text outright, which was a 500.
func TestIDsThatAreNotText(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		opt, _ := withModel(t, llmtest.Echo)
		f := newFixture(t, engine, opt)
		if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
		key := f.key(allAgentScopes...)
		id := f.createAgent(key, "real")
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/v1/ai-agents/%FF", ""},
			{"GET", "/v1/ai-agents/%00", ""},
			{"GET", "/v1/ai-agents/a%00b/stats", ""},
			{"PUT", "/v1/ai-agents/%C3%28/enabled", `{"enabled":true}`},
			{"PATCH", "/v1/ai-agents/%FF", `{"name":"x"}`},
			{"POST", "/v1/ai-agents/%ED%A0%80/questions", `{"question":"x"}`},
			{"POST", "/v1/ai-agents/" + id + "/questions", `{"question":"x","conversation_id":"a\u0000b"}`},
			{"POST", "/v1/ai-agents/" + id + "/questions", `{"question":"x","conversation_id":"\u0000"}`},
		} {
			f.do(req{method: c.method, path: c.path, key: key, body: c.body}).wantError(t, 404, domain.CodeNotFound)
		}
	})
}
