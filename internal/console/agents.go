package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// The AI agents pages are open to every user of the account: agent-role
// users (support staff working beside the AI agents) see them read-only;
// Owners and Admins may also edit an agent's instructions.

// MaxInstructionsLength is the API's limit (PATCH /v1/ai-agents/{id}),
// in Unicode code points.
const MaxInstructionsLength = domain.MaxInstructionsLength

// recentLimit is how many of an agent's latest answered questions are shown.
const recentLimit = 20

type agentRow struct {
	ID, Name  string
	Enabled   bool
	CreatedAt time.Time
	UpdatedAt time.Time
	Stats     domain.AgentStats
}

type agentsPage struct {
	Agents []agentRow
}

func (c *Console) handleAgents(w http.ResponseWriter, r *http.Request, s *session) error {
	as, err := c.store.ListAgents(r.Context(), store.AgentQuery{AccountID: s.user.AccountID})
	if err != nil {
		return err
	}
	p := agentsPage{}
	for _, a := range as {
		st, err := c.store.AgentStats(r.Context(), s.user.AccountID, a.ID)
		if err != nil {
			return err
		}
		p.Agents = append(p.Agents, agentRow{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Stats: st})
	}
	c.render(w, r, s, http.StatusOK, "agents", "AI agents", p)
	return nil
}

type agentPage struct {
	Agent        agentRow
	Instructions string
	Recent       []domain.Question
	CanEdit      bool
	Max          int
	Error        string
}

func (c *Console) agentPage(r *http.Request, s *session, a domain.Agent) (agentPage, error) {
	st, err := c.store.AgentStats(r.Context(), s.user.AccountID, a.ID)
	if err != nil {
		return agentPage{}, err
	}
	recent, err := c.store.RecentQuestions(r.Context(), s.user.AccountID, a.ID, recentLimit)
	if err != nil {
		return agentPage{}, err
	}
	return agentPage{
		Agent:        agentRow{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Stats: st},
		Instructions: a.Instructions, Recent: recent, CanEdit: s.user.Role.CanManageKeys(), Max: MaxInstructionsLength,
	}, nil
}

func (c *Console) handleAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	a, p, err := c.loadAgentPage(r, s, r.PathValue("id"))
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "agent", a.Name, p)
	return nil
}

// loadAgentPage reads agent id of the session's account and its page.
func (c *Console) loadAgentPage(r *http.Request, s *session, id string) (domain.Agent, agentPage, error) {
	a, err := c.store.GetAgent(r.Context(), s.user.AccountID, id)
	if errors.Is(err, domain.ErrNotFound) {
		return a, agentPage{}, errNotFound
	}
	if err != nil {
		return a, agentPage{}, err
	}
	p, err := c.agentPage(r, s, a)
	return a, p, err
}

// showAgentForm is the agent's page again with the instructions as posted
// and what to fix.
func (c *Console) showAgentForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	a, p, err := c.loadAgentPage(r, s, r.PathValue("id"))
	if err != nil {
		return err
	}
	p.Instructions, p.Error = postedInstructions(r), e.Message
	c.render(w, r, s, e.Status, "agent", a.Name, p)
	return nil
}

// postedInstructions are the form's instructions with a browser's CRLF
// line breaks stored as the API would receive them from a program, as LF.
func postedInstructions(r *http.Request) string {
	return strings.ReplaceAll(r.PostForm.Get("instructions"), "\r\n", "\n")
}

// checkInstructions applies the API's PATCH rules to instructions.
// It returns what is wrong, or "".
func checkInstructions(s string) string {
	if !utf8.ValidString(s) { // a form is not JSON: nothing checked this yet
		return "Instructions must be valid text."
	}
	switch domain.CheckText(s, MaxInstructionsLength) {
	case domain.TextTooLong:
		return fmt.Sprintf("Instructions have at most %d characters; these have %d.", MaxInstructionsLength, utf8.RuneCountInString(s))
	case domain.TextControl:
		return "Instructions must not contain control characters other than line breaks and tabs."
	}
	return ""
}

func (c *Console) handleUpdateAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	text := postedInstructions(r)
	if msg := checkInstructions(text); msg != "" {
		return fieldError("instructions", msg)
	}
	now := c.now().UTC().Truncate(time.Millisecond)
	_, err := c.store.UpdateAgent(r.Context(), s.user.AccountID, id, func(a *domain.Agent) (bool, error) {
		if a.Instructions == text {
			return false, nil
		}
		a.Instructions = text
		// updated_at moves on every real change, and always forward.
		if !now.After(a.UpdatedAt) {
			now = a.UpdatedAt.Add(time.Millisecond)
		}
		a.UpdatedAt = now
		return true, nil
	})
	if errors.Is(err, domain.ErrNotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	c.log.Info("console agent instructions updated", "agent_id", id, "user_id", s.user.ID)
	http.Redirect(w, r, "/console/agents/"+id+"?done=instructions", http.StatusSeeOther)
	return nil
}
