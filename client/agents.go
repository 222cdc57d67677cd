package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Key is the API key object GET /me describes. It never holds the secret.
type Key struct {
	ID                 string     `json:"id"`
	Name               string     `json:"name"`
	Description        string     `json:"description"`
	Prefix             string     `json:"prefix"`
	Scopes             []string   `json:"scopes"`
	RateLimitPerMinute int        `json:"rate_limit_per_minute"`
	LastUsedAt         *time.Time `json:"last_used_at"`
	ExpiresAt          *time.Time `json:"expires_at"` // nil: the key does not expire
	// AllowedIPs is the key's IP allowlist (addresses and CIDR ranges);
	// empty when any address may use the key.
	AllowedIPs []string `json:"allowed_ips"`
}

// Agent is an AI agent. List items carry only ID, Name, Enabled and
// CreatedAt (the contract's four fields); Instructions and UpdatedAt are
// filled by single-agent calls (GetAgent, CreateAgent, UpdateAgent,
// SetEnabled).
type Agent struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Enabled      bool      `json:"enabled"`
	CreatedAt    time.Time `json:"created_at"`
	Instructions string    `json:"instructions,omitempty"`
	UpdatedAt    time.Time `json:"updated_at,omitzero"`
	// Adopted is set by CreateAgent when AdoptExisting turned a 409
	// duplicate_value into this existing agent. Not part of the API.
	Adopted bool `json:"-"`
}

// Stats is GET /ai-agents/{id}/stats.
type Stats struct {
	AgentID            string     `json:"agent_id"`
	QuestionsTotal     int64      `json:"questions_total"`
	AnsweredTotal      int64      `json:"answered_total"`
	FailedTotal        int64      `json:"failed_total"`
	LastQuestionAt     *time.Time `json:"last_question_at"`  // nil: never asked
	AverageAnswerMS    *int64     `json:"average_answer_ms"` // nil: nothing answered
	ConversationsTotal int64      `json:"conversations_total"`
}

// Answer is an agent's answer to a question.
type Answer struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Question       string    `json:"question"`
	Answer         string    `json:"answer"`
	CreatedAt      time.Time `json:"created_at"`
	AnswerMS       int64     `json:"answer_ms"`
}

// Me describes the client's own key (GET /me; any valid key).
func (c *Client) Me(ctx context.Context) (Key, error) {
	return dataCall[Key](ctx, c, call{method: http.MethodGet, path: "/me"})
}

// ListOptions selects agents for ListAgents and Agents.
type ListOptions struct {
	// Limit is the page size; 0 leaves it to the server (30). The server
	// clamps values above 100.
	Limit int
	// UpdatedSince, when not zero, keeps agents changed at or after it.
	UpdatedSince time.Time
	// Next is meta.next of the previous page of the same query (ListAgents
	// only; Agents follows it itself).
	Next string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if !o.UpdatedSince.IsZero() {
		q.Set("updated_since", o.UpdatedSince.UTC().Format(time.RFC3339Nano))
	}
	if o.Next != "" {
		q.Set("next", o.Next)
	}
	return q
}

// Page is one page of GET /ai-agents.
type Page struct {
	Agents  []Agent
	Limit   int    // meta.limit: the page size the server applied
	Next    string // meta.next; empty when HasMore is false
	HasMore bool   // meta.has_more
	// RateLimit is what this response's X-RateLimit-* headers said.
	RateLimit RateLimit
}

// ListAgents fetches one page (GET /ai-agents; aiagents:read). Most callers
// want Agents, which follows the pages.
func (c *Client) ListAgents(ctx context.Context, opts ListOptions) (Page, error) {
	p, err := listCall[Agent](ctx, c, call{method: http.MethodGet, path: "/ai-agents", query: opts.query()})
	if err != nil {
		return Page{}, err
	}
	return Page{Agents: p.Items, Limit: p.Limit, Next: p.Next, HasMore: p.HasMore, RateLimit: p.RateLimit}, nil
}

// Agents iterates over every agent the options select, oldest first,
// following meta.next while meta.has_more is true and stopping when it is
// false (not on an empty page). An error ends the iteration after being
// yielded once; breaking out of the loop stops fetching.
//
//	for a, err := range c.Agents(ctx, client.ListOptions{Limit: 100}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(a.ID, a.Name)
//	}
func (c *Client) Agents(ctx context.Context, opts ListOptions) iter.Seq2[Agent, error] {
	return func(yield func(Agent, error) bool) {
		o := opts
		seen := map[string]bool{}
		for {
			p, err := c.ListAgents(ctx, o)
			if err != nil {
				yield(Agent{}, err)
				return
			}
			for _, a := range p.Agents {
				if !yield(a, nil) {
					return
				}
			}
			if !p.HasMore {
				return
			}
			if p.Next == o.Next || seen[p.Next] {
				// A cursor that does not move, or comes round again, would
				// loop until ctx ends.
				yield(Agent{}, errors.New("client: GET /ai-agents: the server sent back a cursor it had already given"))
				return
			}
			seen[p.Next] = true
			o.Next = p.Next
		}
	}
}

// NewAgent is the body of CreateAgent.
type NewAgent struct {
	Name         string `json:"name"`
	Instructions string `json:"instructions,omitempty"`
	// AdoptExisting turns 409 duplicate_value (an agent of that name
	// exists, perhaps created by an earlier attempt whose answer was lost)
	// into success: CreateAgent then fetches and returns the existing agent,
	// with Adopted set. Its instructions are left as they are. Fetching
	// needs aiagents:read; without it the 409 is returned (errors.As gives
	// its ExistingID), with the reason the fetch failed.
	AdoptExisting bool `json:"-"`
}

// CreateAgent creates an agent (POST /ai-agents; aiagents:write). Names are
// unique per account, compared after Unicode normalisation and full case
// folding (ΟΔΟΣ and οδος collide); a taken name is 409
// duplicate_value with Error.ExistingID, unless AdoptExisting.
//
// A create is retried after a transport error or 5xx like any call, with
// the same Idempotency-Key: if the first attempt did create the agent, the
// retry gets that attempt's answer (Idempotent-Replayed), not a second agent.
func (c *Client) CreateAgent(ctx context.Context, a NewAgent) (Agent, error) {
	out, err := dataCall[Agent](ctx, c, call{method: http.MethodPost, path: "/ai-agents", body: a, idempotent: true})
	var e *Error
	if !a.AdoptExisting || !errors.As(err, &e) || e.Code != CodeDuplicateValue || e.ExistingID == "" {
		return out, err
	}
	out, getErr := c.GetAgent(ctx, e.ExistingID)
	if getErr != nil {
		// A key with aiagents:write but not aiagents:read cannot fetch it:
		// the 409 stays the error errors.As finds first, with its
		// ExistingID, and why the fetch failed follows.
		return Agent{}, fmt.Errorf("%w; adopting it failed: %w", err, getErr)
	}
	out.Adopted = true
	return out, nil
}

// agentPath is /ai-agents/{id}[suffix], the id escaped so that it stays one
// path segment.
func agentPath(id, suffix string) (string, error) {
	return idPath("/ai-agents", "agent", id, suffix)
}

// dataCall runs cl and decodes the data of its answer.
func dataCall[T any](ctx context.Context, c *Client, cl call) (T, error) {
	var v T
	r, err := c.do(ctx, cl)
	if err != nil {
		return v, err
	}
	return v, decodeData(r, &v)
}

// agentCall is dataCall on one agent, at /ai-agents/{id}[suffix].
func agentCall[T any](ctx context.Context, c *Client, cl call, id, suffix string) (T, error) {
	return idCall[T](ctx, c, cl, "/ai-agents", "agent", id, suffix)
}

// idCall is dataCall on one resource, at prefix/{id}[suffix]; what names
// it in the error for an empty id.
func idCall[T any](ctx context.Context, c *Client, cl call, prefix, what, id, suffix string) (T, error) {
	var err error
	if cl.path, err = idPath(prefix, what, id, suffix); err != nil {
		var zero T
		return zero, err
	}
	return dataCall[T](ctx, c, cl)
}

// GetAgent fetches one agent (GET /ai-agents/{id}; aiagents:read).
func (c *Client) GetAgent(ctx context.Context, id string) (Agent, error) {
	return agentCall[Agent](ctx, c, call{method: http.MethodGet}, id, "")
}

// AgentUpdate is the body of UpdateAgent; nil fields are left unchanged.
type AgentUpdate struct {
	Name         *string `json:"name,omitempty"`
	Instructions *string `json:"instructions,omitempty"`
}

// UpdateAgent changes an agent's name and/or instructions (PATCH
// /ai-agents/{id}; aiagents:write). A name taken by another agent is 409
// duplicate_value with ExistingID.
func (c *Client) UpdateAgent(ctx context.Context, id string, u AgentUpdate) (Agent, error) {
	return agentCall[Agent](ctx, c, call{method: http.MethodPatch, body: u}, id, "")
}

// SetEnabled enables or disables an agent (PUT /ai-agents/{id}/enabled;
// aiagents:write). Setting the value it already has succeeds.
func (c *Client) SetEnabled(ctx context.Context, id string, enabled bool) (Agent, error) {
	body := struct {
		Enabled bool `json:"enabled"`
	}{enabled}
	return agentCall[Agent](ctx, c, call{method: http.MethodPut, body: body}, id, "/enabled")
}

// EnableAgent is SetEnabled(ctx, id, true).
func (c *Client) EnableAgent(ctx context.Context, id string) (Agent, error) {
	return c.SetEnabled(ctx, id, true)
}

// DisableAgent is SetEnabled(ctx, id, false). The agent keeps its history.
func (c *Client) DisableAgent(ctx context.Context, id string) (Agent, error) {
	return c.SetEnabled(ctx, id, false)
}

// AgentStats reads an agent's question statistics (GET
// /ai-agents/{id}/stats; aiagents:read).
func (c *Client) AgentStats(ctx context.Context, id string) (Stats, error) {
	return agentCall[Stats](ctx, c, call{method: http.MethodGet}, id, "/stats")
}

// Question is the body of Ask.
type Question struct {
	Question string `json:"question"`
	// ConversationID continues an earlier conversation with the agent.
	ConversationID string `json:"conversation_id,omitempty"`
}

// Ask asks an agent a question (POST /ai-agents/{id}/questions;
// aiagents:query). Without the account's ai-answers feature it is 403
// feature_not_enabled; a disabled agent is 409 immutable_state.
//
// Ask is retried like any call, with one Idempotency-Key for all its
// attempts, so the model is asked once (see the package's Retries).
func (c *Client) Ask(ctx context.Context, agentID string, q Question) (Answer, error) {
	return agentCall[Answer](ctx, c, call{method: http.MethodPost, body: q, idempotent: true}, agentID, "/questions")
}
