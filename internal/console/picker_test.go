package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

var (
	pickerOptionRE = regexp.MustCompile(`name="agent" value="([^"]+)"> <bdi>([^<]+)</bdi>`)
	pickerTickedRE = regexp.MustCompile(`name="agent" value="[^"]+" checked> <bdi>([^<]+)</bdi>`)
	pickerAfterRE  = regexp.MustCompile(`name="agent_after" value="([^"]*)"`)
)

// pickerNames are the unticked agents a key form offers, in its order, the
// ticked ones, and the "more" cursor ("" without a "More" button).
func pickerNames(body string) (offered, ticked []string, after string) {
	for _, m := range pickerOptionRE.FindAllStringSubmatch(body, -1) {
		offered = append(offered, html.UnescapeString(m[2]))
	}
	for _, m := range pickerTickedRE.FindAllStringSubmatch(body, -1) {
		ticked = append(ticked, html.UnescapeString(m[1]))
	}
	if m := pickerAfterRE.FindStringSubmatch(body); m != nil {
		after = html.UnescapeString(m[1])
	}
	return offered, ticked, after
}

func agentNames(from, to int, skip ...int) []string {
	var out []string
	for i := from; i <= to; i++ {
		if !slices.Contains(skip, i) {
			out = append(out, fmt.Sprintf("Agent %d", i))
		}
	}
	return out
}

// The picker orders every page as people read names, not only within a
// page: with "Agent 1".."Agent 62", Agent 6 comes before Agent 10 on the
// first page, and "More" continues at Agent 51.
func TestAgentPickerNaturalOrderAcrossPages(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	now := f.clock.Now()
	agents := make([]domain.Agent, 62)
	ids := map[string]string{}
	// Imported in reverse so that neither creation order nor ids give the
	// right answer by chance.
	for i := range agents {
		n := len(agents) - i
		agents[i] = domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: a.ID, Name: fmt.Sprintf("Agent %d", n),
			Instructions: "Be helpful.", Enabled: true, CreatedAt: now, UpdatedAt: now}
		ids[agents[i].Name] = agents[i].ID
	}
	if err := f.st.ImportAgents(context.Background(), agents); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	const form = "/console/developers/keys/new"

	first := b.get(form)
	wantStatus(t, "key form", first, http.StatusOK)
	offered, _, after := pickerNames(first.body)
	if !slices.Equal(offered, agentNames(1, 50)) || after == "" {
		t.Fatalf("first page: %q, more after %q; want Agent 1..Agent 50 and a More button", offered, after)
	}
	more := b.post(form, "/console/developers/keys", url.Values{"op": {"more-agents"}, "agent_after": {after}, "name": {"x"}})
	wantStatus(t, "more agents", more, http.StatusOK)
	if offered, _, after := pickerNames(more.body); !slices.Equal(offered, agentNames(51, 62)) || after != "" {
		t.Errorf("second page: %q, more after %q; want Agent 51..Agent 62 and no More button", offered, after)
	}

	// A ticked agent is shown apart and the list closes up behind it.
	ticked := b.post(form, "/console/developers/keys", url.Values{"op": {"search-agents"}, "agent": {ids["Agent 7"]}, "name": {"x"}})
	wantStatus(t, "ticked", ticked, http.StatusOK)
	offered, sel, after := pickerNames(ticked.body)
	if !slices.Equal(sel, []string{"Agent 7"}) || !slices.Equal(offered, agentNames(1, 51, 7)) {
		t.Errorf("with Agent 7 ticked: ticked %q, offered %q", sel, offered)
	}
	more = b.post(form, "/console/developers/keys", url.Values{"op": {"more-agents"}, "agent_after": {after},
		"agent": {ids["Agent 7"]}, "name": {"x"}})
	if offered, sel, _ := pickerNames(more.body); !slices.Equal(sel, []string{"Agent 7"}) || !slices.Equal(offered, agentNames(52, 62)) {
		t.Errorf("next page with Agent 7 ticked: ticked %q, offered %q", sel, offered)
	}

	// The search still filters, in the same order.
	found := b.post(form, "/console/developers/keys", url.Values{"op": {"search-agents"}, "agent_q": {"agent 1"}, "name": {"x"}})
	want := append([]string{"Agent 1"}, agentNames(10, 19)...)
	if offered, _, after := pickerNames(found.body); !slices.Equal(offered, want) || after != "" {
		t.Errorf("search %q: %q, more after %q; want %q", "agent 1", offered, after, want)
	}
}

// Above pickerCap (2,000) agents found, the picker pages by the store's
// name key: still 50 at a time, "More" going on without repeating one.
func TestAgentPickerAboveCapPagesByStore(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	now := f.clock.Now()
	agents := make([]domain.Agent, 2001)
	for i := range agents {
		agents[i] = domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: a.ID, Name: fmt.Sprintf("Agent %d", i),
			Instructions: "Be helpful.", Enabled: true, CreatedAt: now, UpdatedAt: now}
	}
	if err := f.st.ImportAgents(context.Background(), agents); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	const form = "/console/developers/keys/new"
	first, _, after := pickerNames(b.get(form).body)
	if len(first) != 50 || after == "" {
		t.Fatalf("first page: %d agents, more after %q; want 50 and a More button", len(first), after)
	}
	more := b.post(form, "/console/developers/keys", url.Values{"op": {"more-agents"}, "agent_after": {after}, "name": {"x"}})
	second, _, next := pickerNames(more.body)
	if len(second) != 50 || next == "" || slices.ContainsFunc(second, func(n string) bool { return slices.Contains(first, n) }) {
		t.Errorf("second page: %d agents, more after %q, overlapping the first: %q then %q", len(second), next, first, second)
	}
	// The search still filters.
	found, _, _ := pickerNames(b.post(form, "/console/developers/keys", url.Values{"op": {"search-agents"}, "agent_q": {"agent 19"}, "name": {"x"}}).body)
	if len(found) < 3 || found[0] != "Agent 19" || found[1] != "Agent 190" || found[2] != "Agent 191" {
		t.Errorf("search %q: %q", "agent 19", found)
	}
}
