package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// The AI agents pages are open to every user of the account: agent-role
// users (support staff working beside the AI agents) see them read-only;
// Owners and Admins may also create, rename, enable and disable agents and
// edit their instructions. Every change goes through agents.Service, the
// API's rules: the name rule and its uniqueness, updated_at moving forward.

// recentLimit is how many of an agent's latest answered questions are shown.
const recentLimit = 20

type agentsPage struct {
	Agents []store.AgentPageItem
	Pager  pager
	// Name and Instructions are the creation form's, as posted; formError
	// what to fix in it.
	Name, Instructions string
	formError
	Max int
}

// actor is the session's user as agents.Service sees them: the whole
// account, no key.
func actor(s *session) agents.Actor { return agents.Actor{AccountID: s.user.AccountID} }

// showAgents is a page of the account's agents with their counters (one
// statement, store.AgentPage), searched by name, and the creation form.
func (c *Console) showAgents(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	items, next, err := c.Store.AgentPage(r.Context(), store.AgentPageQuery{AccountID: s.user.AccountID, Search: lp.Search, After: lp.After, Limit: pageSize})
	if err != nil {
		return err
	}
	at := func(it store.AgentPageItem) (time.Time, string) { return it.CreatedAt, it.ID }
	p := agentsPage{Pager: pagerBoth("/console/agents", url.Values{"q": {lp.Search}}, lp, next, items, at),
		Agents: items, Max: domain.MaxInstructionsLength,
		Name: r.PostForm.Get("name"), Instructions: postedInstructions(r)}
	return c.renderForm(w, r, s, e, "agents", "AI agents", &p)
}

// handleCreateAgent makes an enabled agent and shows its page.
func (c *Console) handleCreateAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	name, text := r.PostForm.Get("name"), postedInstructions(r)
	if msg := checkInstructions(text); msg != "" {
		return fieldError("instructions", msg)
	}
	ag, err := c.agents.Create(r.Context(), actor(s), agents.Fields{Name: &name, Instructions: &text})
	if err != nil {
		return err
	}
	c.Log.Info("console agent created", "agent_id", ag.ID, "user_id", s.user.ID)
	return seeOther("/console/agents/" + ag.ID + "?done=agent-created")
}

type agentPage struct {
	Agent        store.AgentPageItem
	Instructions string
	// Name is the rename form's name: the agent's, or as posted.
	Name   string
	Recent []domain.Question
	Max    int
	// Usage is the requests to the agent's routes (usage.go), for the
	// roles that see usage; nil for the others.
	Usage *usageChart
	// formError: what to fix in the form of Field ("name" or
	// "instructions"; "form" for the page as a whole).
	formError
}

func (p *agentPage) set(e *pageError) {
	p.formError.set(e)
	if p.Field == "" {
		p.Field = "form"
	}
}

// showAgentForm is the page of the agent the path names, of the session's
// account, again with the form as posted (the rename's name or the
// instructions) and what to fix when e is not nil.
func (c *Console) showAgentForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	a, err := c.agents.Get(r.Context(), actor(s), r.PathValue("id"))
	if err != nil {
		return err
	}
	st, err := c.Store.AgentStats(r.Context(), s.user.AccountID, a.ID)
	if err != nil {
		return err
	}
	recent, err := c.Store.RecentQuestions(r.Context(), s.user.AccountID, a.ID, recentLimit)
	if err != nil {
		return err
	}
	p := agentPage{
		Agent:        store.AgentPageItem{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Stats: st},
		Instructions: a.Instructions, Name: a.Name, Recent: recent, Max: domain.MaxInstructionsLength,
	}
	if p.Usage, err = c.agentUsage(r, s, a.ID); err != nil {
		return err
	}
	if _, ok := r.PostForm["name"]; ok {
		p.Name = r.PostForm.Get("name")
	}
	if _, ok := r.PostForm["instructions"]; ok {
		p.Instructions = postedInstructions(r)
	}
	return c.renderForm(w, r, s, e, "agent", isolate(p.Agent.Name), &p)
}

// postedInstructions are the form's instructions with a browser's CRLF
// line breaks stored as the API would receive them from a program, as LF.
func postedInstructions(r *http.Request) string {
	return strings.ReplaceAll(r.PostForm.Get("instructions"), "\r\n", "\n")
}

// checkInstructions is what the console says about instructions before
// the service's rules: a form is not JSON, so nothing checked its UTF-8
// yet, and the console counts the characters for the user. It returns what
// is wrong, or "".
func checkInstructions(s string) string {
	if !utf8.ValidString(s) {
		return "Instructions must be valid text."
	}
	if n := utf8.RuneCountInString(s); n > domain.MaxInstructionsLength {
		return fmt.Sprintf("Instructions have at most %d characters; these have %d.", domain.MaxInstructionsLength, n)
	}
	return ""
}

func (c *Console) handleUpdateAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	id, text := r.PathValue("id"), postedInstructions(r)
	if msg := checkInstructions(text); msg != "" {
		return fieldError("instructions", msg)
	}
	if _, err := c.agents.Update(r.Context(), actor(s), id, agents.Fields{Instructions: &text}); err != nil {
		return err
	}
	c.Log.Info("console agent instructions updated", "agent_id", id, "user_id", s.user.ID)
	return seeOther("/console/agents/" + id + "?done=instructions")
}

func (c *Console) handleRenameAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	id, name := r.PathValue("id"), r.PostForm.Get("name")
	if _, err := c.agents.Update(r.Context(), actor(s), id, agents.Fields{Name: &name}); err != nil {
		return err
	}
	c.Log.Info("console agent renamed", "agent_id", id, "user_id", s.user.ID)
	return seeOther("/console/agents/" + id + "?done=agent-renamed")
}

// handleSetAgentEnabled enables (enabled=true) or disables (false) an agent.
func (c *Console) handleSetAgentEnabled(w http.ResponseWriter, r *http.Request, s *session) error {
	id, v := r.PathValue("id"), r.PostForm.Get("enabled")
	done, ok := map[string]string{"true": "agent-enabled", "false": "agent-disabled"}[v]
	if !ok {
		return &pageError{Status: http.StatusBadRequest, Message: "Choose whether the AI agent is enabled."}
	}
	enabled := v == "true"
	if _, err := c.agents.SetEnabled(r.Context(), actor(s), id, enabled); err != nil {
		return err
	}
	c.Log.Info("console agent enabled set", "agent_id", id, "enabled", enabled, "user_id", s.user.ID)
	return seeOther("/console/agents/" + id + "?done=" + done)
}
