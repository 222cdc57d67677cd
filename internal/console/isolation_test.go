package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// rlo is RIGHT-TO-LEFT OVERRIDE: unisolated, it reverses the text after it.
const rlo = "\u202e"

// unisolated returns the context of each place in body where rlo is not
// isolated: right after <bdi> or U+2068 (FSI), or in an element or a tag
// marked dir="auto".
func unisolated(body string) []string {
	var bad []string
	for i := strings.Index(body, rlo); i >= 0; i = nextIndex(body, rlo, i) {
		before := body[:i]
		// The tag the text is in (an attribute's value), or the one it
		// follows (an element's text).
		lt := strings.LastIndexByte(before, '<')
		tag := body[lt : i+strings.IndexByte(body[i:]+">", '>')]
		if strings.HasSuffix(before, "<bdi>") || strings.HasSuffix(before, "\u2068") || strings.Contains(tag, `dir="auto"`) {
			continue
		}
		bad = append(bad, body[max(0, i-80):i])
	}
	return bad
}

func nextIndex(s, sub string, after int) int {
	j := strings.Index(s[after+1:], sub)
	if j < 0 {
		return -1
	}
	return after + 1 + j
}

// TestUserTextIsIsolated names a key, its description, an AI agent and
// its instructions, and asks and answers a question, with a right-to-left
// override, and filters the Logs by one: every page that shows them
// isolates each, so none can reverse the text after it.
func TestUserTextIsIsolated(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	ag := f.agent(a, rlo+"Agent one")
	if _, err := f.st.UpdateAgent(ctx, a.ID, ag.ID, func(g *domain.Agent) (bool, error) {
		g.Instructions = rlo + "Answer in French."
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.RecordQuestion(ctx, domain.Question{ID: domain.NewID(domain.PrefixQuestion, f.clock.Now()), AccountID: a.ID,
		AgentID: ag.ID, ConversationID: domain.NewID(domain.PrefixConvo, f.clock.Now()), Question: rlo + "Where is my order?",
		Answer: rlo + "It ships tomorrow.", CreatedAt: f.clock.Now(), AnswerMS: 321}, true, false); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	created, _ := b.created("/console/developers/keys/new", "/console/developers/keys", url.Values{
		"name": {rlo + "Billing sync"}, "description": {rlo + "nightly"}, "preset": {"aiagent-read"}, "agent": {ag.ID},
		"env": {"live"}, "expiry": {"never"}})
	ks, _ := f.keys.List(ctx, a.ID)
	if _, err := f.keys.Rename(ctx, keys.Actor{User: &owner}, a.ID, ks[0].ID, rlo+"Billing sync 2", rlo+"nightly"); err != nil {
		t.Fatal(err)
	}
	key := "/console/developers/keys/" + ks[0].ID
	pages := []page{created}
	for _, path := range []string{"/console/developers", key, key + "/edit", key + "/rotate", key + "/revoke",
		"/console/developers/audit", "/console/developers/keys/new", "/console/agents", "/console/agents/" + ag.ID,
		"/console/developers/logs?key=" + url.QueryEscape(rlo+"Billing sync 2")} {
		p := b.get(path)
		wantStatus(t, path, p, http.StatusOK)
		pages = append(pages, p)
	}
	for _, p := range pages {
		if !strings.Contains(p.body, rlo) {
			t.Errorf("%s does not show the text at all", p.path)
		}
		for _, ctx := range unisolated(p.body) {
			t.Errorf("%s: not isolated after …%q", p.path, ctx)
		}
	}
	if title := regexp.MustCompile(`<title>[^<]*`).FindString(pages[2].body); !strings.Contains(title, "\u2068"+rlo) {
		t.Errorf("key page title %q", title)
	}
}

// TestRevealReplayShowsNothing: the credential page's cookie, sent again
// within its ten minutes (a copy of it, which the browser would have
// dropped), shows the key's page, not the credential.
func TestRevealReplayShowsNothing(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	posted := b.post("/console/developers/keys/new", "/console/developers/keys",
		url.Values{"name": {"ci"}, "preset": {"aiagent-read"}, "env": {"live"}, "expiry": {"never"}})
	var sealed string
	for _, c := range (&http.Response{Header: posted.header}).Cookies() {
		if c.Name == "agentapi_reveal" {
			sealed = c.Value
		}
	}
	loc := posted.header.Get("Location")
	first := b.get(loc)
	cred := credentialRE.FindString(first.body)
	if sealed == "" || cred == "" {
		t.Fatalf("no reveal cookie %q or credential shown", sealed)
	}
	f.secrets = append(f.secrets, cred)
	f.clock.Advance(time.Minute)
	b.header.Set("Cookie", "agentapi_reveal="+sealed)
	again := b.get(loc)
	if strings.Contains(again.body, cred) || credentialRE.MatchString(again.body) {
		t.Fatal("the replayed cookie showed the credential again")
	}
	wantRedirect(t, "replay", again, strings.TrimSuffix(loc, "/created"))
}
