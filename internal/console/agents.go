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

func (c *Console) handleAgents(w http.ResponseWriter, r *http.Request, s *session) {
	as, err := c.store.ListAgents(r.Context(), store.AgentQuery{AccountID: s.user.AccountID})
	if err != nil {
		c.serverError(w, r, s, err)
		return
	}
	p := agentsPage{}
	for _, a := range as {
		st, err := c.store.AgentStats(r.Context(), s.user.AccountID, a.ID)
		if err != nil {
			c.serverError(w, r, s, err)
			return
		}
		p.Agents = append(p.Agents, agentRow{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, Stats: st})
	}
	c.render(w, r, s, http.StatusOK, "agents", "AI agents", p)
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

func (c *Console) handleAgent(w http.ResponseWriter, r *http.Request, s *session) {
	if a, p, ok := c.loadAgentPage(w, r, s, r.PathValue("id")); ok {
		c.render(w, r, s, http.StatusOK, "agent", a.Name, p)
	}
}

// loadAgentPage reads agent id of the session's account and its page; when
// it cannot, it has answered (404 or 500) and reports false.
func (c *Console) loadAgentPage(w http.ResponseWriter, r *http.Request, s *session, id string) (domain.Agent, agentPage, bool) {
	a, err := c.store.GetAgent(r.Context(), s.user.AccountID, id)
	if errors.Is(err, domain.ErrNotFound) {
		c.notFound(w, r, s)
		return a, agentPage{}, false
	}
	if err != nil {
		c.serverError(w, r, s, err)
		return a, agentPage{}, false
	}
	p, err := c.agentPage(r, s, a)
	if err != nil {
		c.serverError(w, r, s, err)
		return a, agentPage{}, false
	}
	return a, p, true
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

func (c *Console) handleUpdateAgent(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	// Browsers send a textarea's line breaks as CRLF; store them as the API
	// would receive them from a program, as LF.
	text := strings.ReplaceAll(r.PostForm.Get("instructions"), "\r\n", "\n")
	if msg := checkInstructions(text); msg != "" {
		a, p, ok := c.loadAgentPage(w, r, s, id)
		if !ok {
			return
		}
		p.Instructions, p.Error = text, msg
		c.render(w, r, s, http.StatusUnprocessableEntity, "agent", a.Name, p)
		return
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
		c.notFound(w, r, s)
		return
	}
	if err != nil {
		c.serverError(w, r, s, err)
		return
	}
	c.log.Info("console agent instructions updated", "agent_id", id, "user_id", s.user.ID)
	http.Redirect(w, r, "/console/agents/"+id+"?done=instructions", http.StatusSeeOther)
}
