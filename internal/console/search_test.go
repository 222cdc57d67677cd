package console_test

import (
	"cmp"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
)

var (
	formTagRE = regexp.MustCompile(`<form\b[^>]*>`)
	inputRE   = regexp.MustCompile(`<input\b[^>]*>`)
	selectRE  = regexp.MustCompile(`(?s)<select\b[^>]*\bname="([^"]*)"[^>]*>(.*?)</select>`)
	optionRE  = regexp.MustCompile(`<option\b[^>]*\bvalue="([^"]*)"([^>]*)>`)
)

// attr is the value of a tag's attribute, unescaped; "" when it has none.
func attr(tag, name string) string {
	m := regexp.MustCompile(`\s` + name + `="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// formAround is the HTML of the form that holds the element with id.
func formAround(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element %q on the page:\n%s", id, body)
	}
	start, end := strings.LastIndex(body[:i], "<form"), strings.Index(body[i:], "</form>")
	if start < 0 || end < 0 {
		t.Fatalf("element %q is in no form", id)
	}
	return body[start : i+end]
}

// formValues is what a browser sends of a form as it stands: each named
// input's value (a box ticked or not: boxes are left out) and each
// select's chosen option, else its first.
func formValues(form string) url.Values {
	v := url.Values{}
	for _, tag := range inputRE.FindAllString(form, -1) {
		switch name, typ := attr(tag, "name"), attr(tag, "type"); {
		case name == "", typ == "submit", typ == "button", typ == "checkbox", typ == "radio":
		default:
			v.Add(name, attr(tag, "value"))
		}
	}
	for _, sel := range selectRE.FindAllStringSubmatch(form, -1) {
		options := optionRE.FindAllStringSubmatch(sel[2], -1)
		chosen := ""
		for i, o := range options {
			if i == 0 || strings.Contains(o[2], "selected") {
				chosen = html.UnescapeString(o[1])
			}
		}
		v.Set(sel[1], chosen)
	}
	return v
}

// submit sends the form that holds the element with id input, on the page
// from, as a browser would: its fields with typed set over them, by its
// method to its action; it follows redirects, and returns the page it
// lands on and every address it asked for (the last the page's).
func (b *browser) submit(from page, input string, typed url.Values) (page, []string) {
	b.f.t.Helper()
	form := formAround(b.f.t, from.body, input)
	tag := formTagRE.FindString(form)
	values := formValues(form)
	for k, v := range typed {
		values[k] = v
	}
	method, action := strings.ToUpper(cmp.Or(attr(tag, "method"), "get")), cmp.Or(attr(tag, "action"), from.path)
	var p page
	if method == http.MethodPost {
		p = b.do(method, action, values)
	} else {
		action = strings.SplitN(action, "?", 2)[0] + "?" + values.Encode()
		p = b.get(action)
	}
	addrs := []string{action}
	for i := 0; p.status == http.StatusSeeOther && i < 5; i++ {
		loc := p.header.Get("Location")
		addrs = append(addrs, loc)
		p = b.get(loc)
	}
	return p, addrs
}

// A credential typed into any search box of the console, the Logs key
// filter first, is in no address the browser asks for (so in no history
// entry and no proxy's log), nor on the page it lands on; the list finds
// the credential's key by its prefix.
func TestSearchFormsKeepCredentialsOutOfAddresses(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k, other := f.key(a, owner, "Deploy"), f.key(a, owner, "Other")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 3)
	seedUsage(t, f, a.ID, other.Key.ID, 1, 2)
	cred := k.Credential
	secret := cred[strings.LastIndexByte(cred, '_')+1:]
	b := f.signedIn(owner)
	for _, c := range []struct {
		list, input, field string
		finds              bool // the page shows the key's link, and not the other key's
	}{
		{"/console/developers/logs", "filter-key", "key", true},
		{"/console/developers", "keys-q", "q", true},
		{"/console/developers/audit", "audit-q", "q", true},
		{"/console/agents", "agents-q", "q", false},
		{"/console/users", "users-q", "q", false},
	} {
		t.Run(c.input, func(t *testing.T) {
			landed, addrs := b.submit(b.get(c.list), c.input, url.Values{c.field: {cred}})
			wantNoSecret(t, secret, landed, addrs)
			wantStatus(t, c.list, landed, http.StatusOK)
			if last := addrs[len(addrs)-1]; !strings.HasPrefix(last, c.list+"?") || !strings.Contains(last, c.field+"="+k.Key.Prefix) {
				t.Errorf("landed on %q, want %s filtered by %s", last, c.list, k.Key.Prefix)
			}
			if c.finds {
				wantHolds(t, c.list, landed.body, []string{`href="/console/developers/keys/` + k.Key.ID + `"`},
					[]string{`href="/console/developers/keys/` + other.Key.ID + `"`})
			}
		})
	}
}

// wantNoSecret fails the test if the secret, in any case, is in any of
// the addresses or on the page.
func wantNoSecret(t *testing.T, secret string, p page, addrs []string) {
	t.Helper()
	for _, s := range append(addrs, p.body) {
		if u, err := url.QueryUnescape(s); err == nil {
			s = u
		}
		if strings.Contains(strings.ToLower(s), strings.ToLower(secret)) {
			t.Errorf("the credential's secret is in %.200q", s)
		}
	}
}

// The Logs page found by a pasted credential is its key's logs only: the
// filter names the key's prefix, and every row is the key's.
func TestLogsFilterByPastedCredential(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k, other := f.key(a, owner, "Deploy"), f.key(a, owner, "Other")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 3)
	seedUsage(t, f, a.ID, other.Key.ID, 1, 2)
	b := f.signedIn(owner)
	landed, addrs := b.submit(b.get("/console/developers/logs"), "filter-key",
		url.Values{"key": {k.Credential}, "route": {"GET /v1/me?k=" + k.Credential}})
	wantNoSecret(t, k.Credential[strings.LastIndexByte(k.Credential, '_')+1:], landed, addrs)
	wantStatus(t, "logs", landed, http.StatusOK)
	wantHolds(t, "logs", landed.body, []string{`id="filter-key" value="` + k.Key.Prefix + `"`}, nil)
	landed, _ = b.submit(b.get("/console/developers/logs"), "filter-key", url.Values{"key": {k.Credential}})
	if rows := logRowRE.FindAllString(landed.body, -1); len(rows) != 3 {
		t.Errorf("%d logs, want the key's 3", len(rows))
	}
	if n := strings.Count(landed.body, `href="/console/developers/keys/`+k.Key.ID+`"`); n != 3 || strings.Contains(landed.body, other.Key.ID) {
		t.Errorf("the rows are not all the key's: %d of its links, the other key's shown: %v", n, strings.Contains(landed.body, other.Key.ID))
	}
}

// The search form's address refuses a form without the session's CSRF
// token and a list it does not know; a term too long is cut so that the
// address stays short, and the list says it is too long.
func TestSearchFormRefusals(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	keys := b.get("/console/developers")
	wantStatus(t, "no token", b.do(http.MethodPost, "/console/search", url.Values{"list": {"keys"}, "q": {"x"}}), http.StatusForbidden)
	wantStatus(t, "unknown list", b.post("/console/developers", "/console/search", url.Values{"list": {"nope"}}), http.StatusNotFound)
	long := strings.Repeat("é", store.MaxSearch)
	p := b.post("/console/developers", "/console/search", url.Values{"list": {"keys"}, "q": {long}})
	wantRedirect(t, "long term", p, "/console/developers?")
	if loc := p.header.Get("Location"); len(loc) > 3*(store.MaxSearch+1)+len("/console/developers?q=") {
		t.Errorf("Location is %d bytes long", len(loc))
	}
	wantStatus(t, "long term", b.get(p.header.Get("Location")), http.StatusBadRequest)
	landed, addrs := b.submit(keys, "keys-q", url.Values{"q": {"  Deploy  "}, "status": {"active"}})
	if last := addrs[len(addrs)-1]; landed.status != http.StatusOK || last != "/console/developers?q=Deploy&status=active" {
		t.Errorf("a plain search landed on %q (%d)", last, landed.status)
	}
}
