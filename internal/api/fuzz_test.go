package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
)

// FuzzParseObject: any body either parses into members that re-encode to
// an equivalent object with unique names, or is refused as invalid_json;
// never a panic, never another code.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"x"}`, `{"name":"a","name":"b"}`, `[]`, `{"a":{"b":[1,2,{"c":null}]}}`,
		`{"name":"\u0000"}`, "{\"n\":\"\xff\"}", `{"a":1}{}`, ` {"enabled" : true } `, `{"x":1e999}`, `{`, ``, `null`,
		strings.Repeat("[", 5000), `{"a":"` + strings.Repeat("é", 100) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		members, err := parseObject(body)
		if err != nil {
			fuzzParseObjectRefused(t, body, err)
			return
		}
		fuzzParseObjectAccepted(t, body, members)
	})
}

// fuzzParseObjectRefused checks a refusal of FuzzParseObject: invalid_json
// with a message, and field errors only for attributes given twice.
func fuzzParseObjectRefused(t *testing.T, body []byte, err *domain.Error) {
	t.Helper()
	if err.Code != domain.CodeInvalidJSON || err.Message == "" {
		t.Fatalf("code %s for %q", err.Code, body)
	}
	for _, fe := range err.Fields { // only attributes given twice are named
		if fe.Code != domain.CodeInvalidJSON || !bytes.Contains(body, []byte(`"`)) {
			t.Fatalf("field error %+v for %q", fe, body)
		}
	}
}

// fuzzParseObjectAccepted checks what FuzzParseObject accepted: valid
// UTF-8, unique members with valid values, and an object encoding/json
// reads with as many members.
func fuzzParseObjectAccepted(t *testing.T, body []byte, members []member) {
	t.Helper()
	if !utf8.Valid(body) {
		t.Fatalf("accepted invalid UTF-8 %q", body)
	}
	obj := fuzzParseObjectMembers(t, members)
	// Whatever we accepted, encoding/json also accepts as an object.
	var std map[string]json.RawMessage
	if err := json.Unmarshal(body, &std); err != nil {
		t.Fatalf("accepted %q that encoding/json refuses: %v", body, err)
	}
	if len(std) != len(obj) {
		t.Fatalf("member count %d vs %d for %q", len(obj), len(std), body)
	}
}

// fuzzParseObjectMembers checks that members have unique names and valid
// raw values, and returns them as an object.
func fuzzParseObjectMembers(t *testing.T, members []member) map[string]json.RawMessage {
	t.Helper()
	seen := map[string]bool{}
	obj := map[string]json.RawMessage{}
	for _, m := range members {
		if seen[m.name] {
			t.Fatalf("duplicate member %q accepted", m.name)
		}
		seen[m.name] = true
		if !json.Valid(m.raw) {
			t.Fatalf("member %q has invalid raw value %q", m.name, m.raw)
		}
		obj[m.name] = m.raw
	}
	return obj
}

// FuzzQuery: parsing never panics, every accepted parameter appears in the
// output once, and every problem uses a code of the contract's table.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5", "limit=5&limit=6", "a=1&b=2", "%zz", "x=1;y=2", "&&=&", "next=%00",
		"updated_since=2026-01-01T00:00:00Z", "limit=" + strings.Repeat("9", 500), "l%69mit=3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/v1/ai-agents", nil)
		r.URL.RawQuery = raw
		var p problems
		got := p.query(r, "limit", "next", "updated_since")
		for name := range got {
			if !slices.Contains([]string{"limit", "next", "updated_since"}, name) {
				t.Fatalf("unknown parameter %q passed through", name)
			}
		}
		for _, fe := range p.fields {
			if !slices.Contains(domain.Codes, fe.Code) || fe.Message == "" {
				t.Fatalf("bad field error %+v", fe)
			}
		}
		if err := p.err(); err != nil && statusOf(domain.ErrorCode(err)) != http.StatusBadRequest {
			t.Fatalf("query problems gave status %d", statusOf(domain.ErrorCode(err)))
		}
		_ = parseLimit(got["limit"], true)
		hasQueryCredential(raw)
	})
}

// FuzzCursor: a cursor decodes only under the account and filter that made
// it, a decoded cursor round-trips, and nothing a client sends panics.
func FuzzCursor(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	sg := newCursorSigner(key)
	other := newCursorSigner([]byte("another key, same length as it.."))
	good := encodeCursor(sg, "acct_a", "", cursor{createdAt: time.UnixMilli(1700000000000).UTC(), id: "agt_x"})
	f.Add(good, "acct_a", "")
	f.Add(good, "acct_b", "")
	f.Add(good, "acct_a", "updated_since=1")
	f.Add("", "acct_a", "")
	f.Add("AAAA", "acct_a", "")
	f.Fuzz(func(t *testing.T, s, account, filter string) {
		c, ok := decodeCursor(sg, account, filter, s)
		if _, byOther := decodeCursor(other, account, filter, s); ok && byOther {
			t.Fatalf("%q decodes under two keys", s)
		}
		if !ok {
			return
		}
		// Only the account and filter that made a cursor can read it: the
		// same bytes never decode for another account.
		if _, ok := decodeCursor(sg, account+"x", filter, s); ok {
			t.Fatalf("cursor %q decodes for two accounts", s)
		}
		if _, ok := decodeCursor(sg, account, filter+"x", s); ok {
			t.Fatalf("cursor %q decodes for two filters", s)
		}
		again := encodeCursor(sg, account, filter, c)
		c2, ok := decodeCursor(sg, account, filter, again)
		if !ok || c2.id != c.id || !c2.createdAt.Equal(c.createdAt) {
			t.Fatalf("round trip of %+v failed", c)
		}
	})
}

// FuzzRequest: a whole request with fuzzed method, path, query, headers
// and body through the real handler stack always answers the contract's
// envelope with a code of its table, and never a 500.
func FuzzRequest(f *testing.F) {
	f.Add("POST", "/v1/ai-agents", "", "application/json", `{"name":"x"}`)
	f.Add("PUT", "/v1/ai-agents/agt_1/enabled", "", "application/json", `{"enabled":"yes"}`)
	f.Add("GET", "/v1/ai-agents", "limit=5&next=abc", "", "")
	f.Add("PATCH", "/v1/ai-agents/%00", "", "text/plain", "\x00")
	f.Add("GET", "/v1/me", "api_key=1", "", "")
	f.Fuzz(func(t *testing.T, method, path, query, ctype, body string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path+query, " \r\n#?") {
			return
		}
		fx := fuzzFixture(t)
		r := httptest.NewRequest("GET", "http://api.test/", nil)
		r.Method = method
		r.URL.Path = path
		r.URL.RawQuery = query
		r.Body = http.NoBody
		if body != "" {
			r.Body = ioNopCloser(body)
			r.ContentLength = int64(len(body))
		}
		r.Header.Set("Authorization", "Bearer "+fx.key)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, r)
		if rec.Code >= 500 {
			t.Fatalf("%s %s?%s: %d %s", method, path, query, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 {
			var env struct {
				Error struct {
					Code    domain.Code `json:"code"`
					Message string      `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || !slices.Contains(domain.Codes, env.Error.Code) ||
				statusOf(env.Error.Code) != rec.Code || env.Error.Message == "" {
				t.Fatalf("%d with body %q", rec.Code, rec.Body.String())
			}
		}
		if bytes.Contains(rec.Body.Bytes(), []byte("goroutine ")) {
			t.Fatal("stack trace in a response")
		}
	})
}

func validMethod(m string) bool {
	if m == "" || len(m) > 10 {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func ioNopCloser(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

// fuzzFix is one real handler stack shared by every fuzz input (a store
// per input would make fuzzing crawl); TestMain removes its files.
type fuzzFix struct {
	h   http.Handler
	key string
}

var (
	fuzzOnce sync.Once
	fuzzFx   *fuzzFix
	fuzzErr  error
	fuzzDirs []string
)

func fuzzFixture(t *testing.T) *fuzzFix {
	t.Helper()
	fuzzOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentapi-fuzz")
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzDirs = append(fuzzDirs, dir)
		ctx := context.Background()
		st, err := store.Open(ctx, filepath.Join(dir, "fuzz.db"))
		if err != nil {
			fuzzErr = err
			return
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "fuzz", Active: true, CreatedAt: now}
		u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: "fuzz@example.com", Role: domain.RoleOwner, PasswordHash: "-", Active: true, CreatedAt: now}
		if fuzzErr = st.CreateAccount(ctx, a); fuzzErr != nil {
			return
		}
		if fuzzErr = st.CreateUser(ctx, u); fuzzErr != nil {
			return
		}
		c, err := keys.New(st, nil).Create(ctx, keys.Actor{User: &u}, keys.CreateParams{
			AccountID: a.ID, Name: "fuzz", Scopes: domain.Scopes, RateLimit: domain.MaxRateLimitPerMinute})
		if err != nil {
			fuzzErr = err
			return
		}
		secret, _ := st.Secret(ctx, "cursor")
		mem := ratelimit.NewMemory(nil)
		log := slog.New(slog.DiscardHandler)
		h, err := New(Config{
			Store: st, Limiter: mem, UnauthLimiter: mem, Toucher: keys.NewToucher(st.TouchKeys, log, time.Second),
			Log: log, CursorKey: secret,
		})
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzFx = &fuzzFix{key: c.Credential, h: h}
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzFx
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range fuzzDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// parseObject is readObject's parser, as the fuzz tests call it.
func parseObject(body []byte) ([]member, *domain.Error) {
	o, _, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	var members []member
	for quoted, raw := range o.members {
		members = append(members, member{unquote(quoted), raw})
	}
	return members, nil
}

// member is one attribute of a request object, in the order sent.
type member struct {
	name string
	raw  json.RawMessage
}
