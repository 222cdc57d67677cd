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
)

var agentRowRE = regexp.MustCompile(`href="/console/agents/(agt_[0-9A-Za-z]+)"`)

// Owners and Admins create, rename, disable and enable AI agents, with
// the API's rules (agents.Service): a name taken in another case or form
// is refused beside the field, updated_at moves only on a real change, and
// every form answers 303 to the agent's page.
func TestAgentManagement(t *testing.T) {
	f := newFixture(t)
	a, _ := f.account("Acme")
	ctx := context.Background()
	helper := f.agent(a, "Helper")
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)
	b := f.signedIn(admin)

	list := b.get("/console/agents")
	if !strings.Contains(list.body, `id="create-agent-form"`) {
		t.Fatal("an Admin has no creation form")
	}
	p := b.post("/console/agents", "/console/agents", url.Values{"name": {"  Billing bot "}, "instructions": {"Be brief.\r\nBe kind."}})
	wantRedirect(t, "create", p, "/console/agents/agt_")
	loc := p.header.Get("Location")
	id := strings.TrimSuffix(strings.TrimPrefix(loc, "/console/agents/"), "?done=agent-created")
	made, err := f.st.GetAgent(ctx, a.ID, id)
	if err != nil || made.Name != "Billing bot" || made.Instructions != "Be brief.\nBe kind." || !made.Enabled {
		t.Fatalf("created %+v, %v", made, err)
	}
	if shown := b.get(loc); !strings.Contains(shown.body, "The AI agent is created and enabled.") {
		t.Fatalf("no notice after creating:\n%s", shown.body)
	}

	checkCreateRefusals(t, b)
	if n := len(agentRowRE.FindAllString(b.get("/console/agents").body, -1)); n != 2 {
		t.Fatalf("%d agents listed, want 2", n)
	}
	checkAgentChanges(t, f, b, a, helper, made)
}

// checkCreateRefusals posts agents the rules refuse: each refusal is
// beside its field, keeping what was typed.
func checkCreateRefusals(t *testing.T, b *browser) {
	t.Helper()
	for _, tc := range []struct{ name, instructions, field, message string }{
		{"HELPER", "kept text", "name", "already exists"},
		{"helper ", "", "name", "already exists"},
		{"   ", "", "name", "must not be blank"},
		{"\u200b", "", "name", "visible character"},
		{strings.Repeat("n", 201), "", "name", "at most 200"},
		{"Fine", "bell\a", "instructions", "control characters"},
		{"Fine", strings.Repeat("é", 10001), "instructions", "at most 10000"},
		{"Fine", "bad \xff", "instructions", "valid text"},
	} {
		p := b.post("/console/agents", "/console/agents", url.Values{"name": {tc.name}, "instructions": {tc.instructions}})
		wantStatus(t, "create "+tc.name, p, http.StatusUnprocessableEntity)
		if !strings.Contains(p.body, `aria-describedby="`+tc.field+`-error"`) || !strings.Contains(p.body, `id="`+tc.field+`-error"`) ||
			!strings.Contains(p.body, tc.message) || strings.Contains(p.body, `id="form-error"`) {
			t.Fatalf("create %q: %s not marked with %q:\n%s", tc.name, tc.field, tc.message, p.body)
		}
		if tc.instructions == "kept text" && !strings.Contains(p.body, ">kept text</textarea>") {
			t.Fatal("the instructions typed are lost")
		}
	}
}

// checkAgentChanges renames, disables and enables the agent made, by the
// API's rules, leaving helper as it is.
func checkAgentChanges(t *testing.T, f *fixture, b *browser, a domain.Account, helper, made domain.Agent) {
	t.Helper()
	ctx, id := context.Background(), made.ID
	// Rename: the API's rules; the same name again changes nothing.
	path := "/console/agents/" + id
	f.clock.Advance(time.Minute)
	wantRedirect(t, "rename", b.post(path, path+"/name", url.Values{"name": {"Billing"}}), path+"?done=agent-renamed")
	renamed, _ := f.st.GetAgent(ctx, a.ID, id)
	if renamed.Name != "Billing" || !renamed.UpdatedAt.After(made.UpdatedAt) || renamed.Instructions != made.Instructions {
		t.Fatalf("renamed %+v", renamed)
	}
	f.clock.Advance(time.Minute)
	wantRedirect(t, "same name", b.post(path, path+"/name", url.Values{"name": {"Billing"}}), path)
	if again, _ := f.st.GetAgent(ctx, a.ID, id); !again.UpdatedAt.Equal(renamed.UpdatedAt) {
		t.Fatal("a rename to the same name moved updated_at")
	}
	wantStatus(t, "rename to another's name", b.post(path, path+"/name", url.Values{"name": {"HELPER"}}), http.StatusUnprocessableEntity)
	p := b.post(path, path+"/name", url.Values{"name": {"helper"}})
	if !strings.Contains(p.body, `id="agent-name" value="helper"`) || !strings.Contains(p.body, `id="name-error"`) ||
		!strings.Contains(p.body, "already exists") || strings.Contains(p.body, `id="instructions-error"`) {
		t.Fatalf("the rename's name is not marked:\n%s", p.body)
	}
	if got, _ := f.st.GetAgent(ctx, a.ID, helper.ID); got.Name != "Helper" {
		t.Fatal("the other agent changed")
	}

	// Disable, enable; a value the form does not send is a 400.
	wantRedirect(t, "disable", b.post(path, path+"/enabled", url.Values{"enabled": {"false"}}), path+"?done=agent-disabled")
	if got, _ := f.st.GetAgent(ctx, a.ID, id); got.Enabled {
		t.Fatal("not disabled")
	}
	shown := b.get(path + "?done=agent-disabled")
	if !strings.Contains(shown.body, `id="enable-agent"`) || !strings.Contains(shown.body, "badge-expired\">disabled") {
		t.Fatalf("a disabled agent's page:\n%s", shown.body)
	}
	wantRedirect(t, "enable", b.post(path, path+"/enabled", url.Values{"enabled": {"true"}}), path+"?done=agent-enabled")
	if got, _ := f.st.GetAgent(ctx, a.ID, id); !got.Enabled {
		t.Fatal("not enabled")
	}
	wantStatus(t, "enabled=maybe", b.post(path, path+"/enabled", url.Values{"enabled": {"maybe"}}), http.StatusBadRequest)
	wantStatus(t, "unknown agent", b.post(path, "/console/agents/agt_nope/enabled", url.Values{"enabled": {"false"}}), http.StatusNotFound)
	wantStatus(t, "rename unknown agent", b.post(path, "/console/agents/agt_nope/name", url.Values{"name": {"x"}}), http.StatusNotFound)
}

// The new forms keep the console's protections: 404 for the agent role
// and for another account's agent, 403 without the session's CSRF token,
// and what a user typed comes back escaped.
func TestAgentFormsProtections(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ctx := context.Background()
	ag := f.agent(a, `<img src=x onerror=alert(1)>`)
	other, _ := f.account("Other")
	theirs := f.agent(other, "Theirs")
	agentUser := f.user(a, "agent@acme.example", domain.RoleAgent)

	viewer := f.signedIn(agentUser)
	list := viewer.get("/console/agents")
	if strings.Contains(list.body, `id="create-agent-form"`) || strings.Contains(viewer.get("/console/agents/"+ag.ID).body, `id="rename-form"`) {
		t.Fatal("an agent-role user sees a management form")
	}
	for _, path := range []string{"/console/agents", "/console/agents/" + ag.ID + "/name", "/console/agents/" + ag.ID + "/enabled"} {
		p := viewer.post("/console/agents", path, url.Values{"name": {"sneaky"}, "enabled": {"false"}})
		wantStatus(t, "agent role: POST "+path, p, http.StatusNotFound)
	}

	b := f.signedIn(owner)
	for _, path := range []string{"/console/agents/" + theirs.ID + "/name", "/console/agents/" + theirs.ID + "/enabled"} {
		wantStatus(t, "another account's: "+path, b.post("/console/agents", path, url.Values{"name": {"mine"}, "enabled": {"false"}}), http.StatusNotFound)
	}
	for _, path := range []string{"/console/agents", "/console/agents/" + ag.ID + "/name", "/console/agents/" + ag.ID + "/enabled"} {
		p := b.do(http.MethodPost, path, url.Values{"name": {"no token"}, "enabled": {"false"}})
		wantStatus(t, "no token: "+path, p, http.StatusForbidden)
	}
	if got, _ := f.st.GetAgent(ctx, other.ID, theirs.ID); got.Name != "Theirs" || !got.Enabled {
		t.Fatal("another account's agent changed")
	}
	if got, _ := f.st.GetAgent(ctx, a.ID, ag.ID); got.Name != ag.Name || !got.Enabled {
		t.Fatal("an agent changed without a token or by the agent role")
	}
	if p := b.get("/console/agents?q=" + url.QueryEscape("zz")); len(agentRowRE.FindAllString(p.body, -1)) != 0 {
		t.Fatal("search: a non-matching agent listed")
	}

	evil := `"><script>alert(1)</script>`
	pages := []page{
		b.get("/console/agents"),
		b.get("/console/agents/" + ag.ID),
		b.get("/console/agents?q=" + url.QueryEscape(evil)),
		b.post("/console/agents", "/console/agents", url.Values{"name": {evil + strings.Repeat("x", 200)}, "instructions": {evil}}),
		b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID+"/name", url.Values{"name": {evil + strings.Repeat("x", 200)}}),
	}
	for _, p := range pages {
		if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<img src=x") {
			t.Errorf("%s (%d) shows raw markup", p.path, p.status)
		}
	}
	if !strings.Contains(pages[0].body, "&lt;img src=x") || !strings.Contains(pages[3].body, "&lt;script&gt;") {
		t.Error("the names are not shown escaped")
	}
}

// The agents page lists 50 of 300 agents, with their counters, and reaches
// every agent once by its next-page links; search narrows it by name.
func TestAgentsPageIsPaginated(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	seedMany(t, f.st, f.keys, a, owner, f.clock.Now(), 300)
	b := f.signedIn(owner)
	seen, pages := walkPages(t, b, "/console/agents", agentRowRE)
	if len(seen) != 300 || pages != 6 {
		t.Fatalf("%d agents over %d pages, want 300 over 6", len(seen), pages)
	}
	for _, tc := range []struct {
		q    string
		want int
	}{{"agent 0299", 1}, {"AGENT 012", 10}, {"%", 0}} {
		p := b.get("/console/agents?q=" + url.QueryEscape(tc.q))
		if n := len(agentRowRE.FindAllString(p.body, -1)); n != tc.want {
			t.Errorf("search %q: %d agents, want %d", tc.q, n, tc.want)
		}
	}
	for _, path := range []string{"/console/agents?after=nonsense", "/console/agents?q=" + strings.Repeat("x", 201)} {
		wantStatus(t, path, b.get(path), http.StatusBadRequest)
	}
}
