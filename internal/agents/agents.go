// Package agents owns the AI agent lifecycle: creating, reading, listing,
// renaming, re-instructing, enabling and disabling agents, and their
// counters. It applies the name rule (domain.CheckName), turns a name that
// is taken into duplicate_value with the holder's id, decides who may learn
// that id, and keeps updated_at moving forward. The API calls Service; the
// console will too, so each rule lives here once.
package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/store"
)

// Service creates, reads, lists and changes an account's AI agents.
type Service struct {
	store *store.Store
	now   func() time.Time
	lists *ListCache // nil: pages are read from the store
	fresh *fresh.Tracker
}

// New returns a Service; now is the clock (time.Now when nil).
func New(st *store.Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, now: now}
}

// WithListCache makes List answer pages from c where t's tokens say it
// may (ListCache).
func (s *Service) WithListCache(c *ListCache, t *fresh.Tracker) *Service {
	s.lists, s.fresh = c, t
	return s
}

// Actor is who acts on an account's agents. An API key restricted to some
// agents may not create agents, lists only its own, and never learns the id
// of another (docs/api.md, Agent restriction). Key is nil for a console user or
// the operator, who see the whole account.
type Actor struct {
	AccountID string
	Key       *domain.APIKey
}

func (a Actor) restricted() bool { return a.Key != nil && a.Key.Restricted() }

// MayCreate says whether the actor may create agents: a restricted key may
// not, and the API asks before it reads the body.
func (a Actor) MayCreate() error {
	if a.restricted() {
		return domain.Errorf(domain.CodeAccessDenied,
			"This API key is restricted to specific AI agents and cannot create agents.")
	}
	return nil
}

// sees reports whether the actor may learn that agent id exists.
func (a Actor) sees(id string) bool { return a.Key == nil || a.Key.AllowsAgent(id) }

// NotFound is the error for an agent id that is not in the account. The id
// is echoed cut to 64 characters: it comes from the caller. A credential
// pasted in its place (GET /v1/ai-agents/agk_live_…) is echoed only up to
// its public prefix (credential.Redact), and from anything else that
// starts like one nothing past agk_: answers end up in clients' logs and
// support tickets, and the request log already keeps the secret out.
func NotFound(id string) error {
	if i := strings.Index(id, credential.Tag+"_"); i >= 0 {
		shown := credential.Redact(id[i:])
		if shown == "" {
			shown = "[redacted]"
		}
		id = id[:i] + shown
	}
	if r := []rune(id); len(r) > 64 {
		id = string(r[:64]) + "…"
	}
	return domain.Errorf(domain.CodeNotFound, "No AI agent %q in this account.", id)
}

// Fields describes an agent's text as given; a nil field is left as it is
// (Update) or empty (Create; a name is required there).
type Fields struct {
	Name         *string
	Instructions *string
}

// Create makes an enabled agent named p.Name in the actor's account.
func (s *Service) Create(ctx context.Context, actor Actor, p Fields) (domain.Agent, error) {
	if err := actor.MayCreate(); err != nil {
		return domain.Agent{}, err
	}
	if p.Name == nil {
		return domain.Agent{}, fieldErr(domain.CodeMissingField, "name", "name is required.")
	}
	name, instructions, err := check(p)
	if err != nil {
		return domain.Agent{}, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	ag := domain.Agent{
		ID: domain.NewID(domain.PrefixAgent, now), AccountID: actor.AccountID,
		Name: name, Instructions: instructions, Enabled: true, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.store.CreateAgent(ctx, ag); err != nil {
		return domain.Agent{}, duplicateName(err, name, actor)
	}
	return ag, nil
}

// check applies the name rule and the text rule to the fields given and
// returns the name as stored (trimmed) and the instructions.
func check(p Fields) (name, instructions string, err error) {
	if p.Name != nil {
		var problem domain.NameProblem
		name, problem = domain.CheckName(*p.Name)
		switch problem {
		case domain.NameOK:
		case domain.NameNotUTF8:
			return "", "", fieldErr(domain.CodeInvalidValue, "name", "name must be UTF-8 text.")
		case domain.NameBlank:
			return "", "", fieldErr(domain.CodeInvalidValue, "name", "name must not be blank.")
		case domain.NameTooLong:
			return "", "", fieldErr(domain.CodeInvalidValue, "name", fmt.Sprintf("name must be at most %d characters.", domain.MaxNameLength))
		case domain.NameControl:
			return "", "", fieldErr(domain.CodeInvalidValue, "name", "name must not contain control characters.")
		default:
			return "", "", fieldErr(domain.CodeInvalidValue, "name", "name must contain a visible character: bidirectional controls, zero-width characters and combining marks alone are not a name.")
		}
	}
	if p.Instructions != nil {
		instructions = *p.Instructions
		switch domain.CheckText(instructions, domain.MaxInstructionsLength) {
		case domain.TextTooLong:
			return "", "", fieldErr(domain.CodeInvalidValue, "instructions", fmt.Sprintf("instructions must be at most %d characters.", domain.MaxInstructionsLength))
		case domain.TextControl:
			return "", "", fieldErr(domain.CodeInvalidValue, "instructions", "instructions must not contain control characters other than line breaks and tabs.")
		}
	}
	return name, instructions, nil
}

func fieldErr(code domain.Code, field, msg string) error {
	return &domain.Error{Code: code, Message: msg, Fields: []domain.FieldError{{Field: field, Code: code, Message: msg}}}
}

// duplicateName turns a store duplicate into duplicate_value, which a
// client may adopt as success through existing_id; an actor restricted to
// other agents is told the name is taken but not by which agent.
func duplicateName(err error, name string, actor Actor) error {
	var dup *domain.DuplicateError
	if !errors.As(err, &dup) {
		return fmt.Errorf("store agent: %w", err)
	}
	msg := fmt.Sprintf("An AI agent named %q already exists in this account.", name)
	id := dup.ExistingID
	if !actor.sees(id) {
		id = ""
		msg = fmt.Sprintf("An AI agent named %q already exists in this account; its id is not shown, as this API key is restricted to other AI agents.", name)
	}
	return &domain.Error{
		Code: domain.CodeDuplicateValue, Message: msg, ExistingID: id,
		Fields: []domain.FieldError{{Field: "name", Code: domain.CodeDuplicateValue, Message: msg}},
	}
}

// Get returns an agent of the actor's account; not_found otherwise.
func (s *Service) Get(ctx context.Context, actor Actor, id string) (domain.Agent, error) {
	ag, err := s.store.GetAgent(ctx, actor.AccountID, id)
	if errors.Is(err, domain.ErrNotFound) {
		return ag, NotFound(id)
	}
	if err != nil {
		return ag, fmt.Errorf("get agent: %w", err)
	}
	return ag, nil
}

// Page selects one keyset page of a list, as the API's cursor carries it.
type Page struct {
	// Limit is how many agents to read; 0 or less reads them all.
	Limit int
	// UpdatedSince, when set, keeps agents with updated_at >= it.
	UpdatedSince *time.Time
	// AfterID, when set, starts strictly after (AfterCreatedAt, AfterID).
	AfterCreatedAt time.Time
	AfterID        string
	// Version is the account's list version read with the request's rate
	// limit decision (keys.Admit): a page read under the same
	// version may be answered from memory (ListCache).
	Version ListVersion
}

// List returns a page of the account's agents ordered by (created_at, id):
// only those a restricted key may address. The items may be shared with
// the list cache and must not be modified.
func (s *Service) List(ctx context.Context, actor Actor, p Page) ([]store.AgentItem, error) {
	q := store.AgentQuery{
		AccountID: actor.AccountID, Limit: p.Limit, UpdatedSince: p.UpdatedSince,
		AfterCreatedAt: p.AfterCreatedAt, AfterID: p.AfterID,
	}
	if actor.restricted() {
		q.OnlyKeyID = actor.Key.ID
	}
	items, err := s.listItems(ctx, q, p.Version)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return items, nil
}

// Update renames and re-instructs an agent: the fields given replace the
// agent's. Nothing changes, updated_at included, unless a value differs.
func (s *Service) Update(ctx context.Context, actor Actor, id string, p Fields) (domain.Agent, error) {
	name, instructions, err := check(p)
	if err != nil {
		return domain.Agent{}, err
	}
	return s.update(ctx, actor, id, name, func(ag *domain.Agent) bool {
		changed := false
		if p.Name != nil && name != ag.Name {
			ag.Name, changed = name, true
		}
		if p.Instructions != nil && instructions != ag.Instructions {
			ag.Instructions, changed = instructions, true
		}
		return changed
	})
}

// SetEnabled enables or disables an agent; setting what it already is
// changes nothing.
func (s *Service) SetEnabled(ctx context.Context, actor Actor, id string, enabled bool) (domain.Agent, error) {
	return s.update(ctx, actor, id, "", func(ag *domain.Agent) bool {
		if ag.Enabled == enabled {
			return false
		}
		ag.Enabled = enabled
		return true
	})
}

// update runs change on the stored agent and, when it changed something,
// moves updated_at forward: past the clock, and past the last write even if
// this instance's clock is behind the one that made it.
func (s *Service) update(ctx context.Context, actor Actor, id, name string, change func(*domain.Agent) bool) (domain.Agent, error) {
	now := s.now().UTC()
	ag, err := s.store.UpdateAgent(ctx, actor.AccountID, id, func(ag *domain.Agent) (bool, error) {
		if !change(ag) {
			return false, nil
		}
		ag.UpdatedAt = later(ag.UpdatedAt, now)
		return true, nil
	})
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return ag, NotFound(id)
	case err != nil:
		return ag, duplicateName(err, name, actor)
	}
	return ag, nil
}

// later is the updated_at of a change made at now to a record last updated
// at prev: now at the store's millisecond precision, or a millisecond past
// prev when now is not after it.
func later(prev, now time.Time) time.Time {
	now = now.Truncate(time.Millisecond)
	if !now.After(prev) {
		return prev.Add(time.Millisecond)
	}
	return now
}

// Stats returns an agent's question counters; not_found unless the agent
// is in the actor's account.
func (s *Service) Stats(ctx context.Context, actor Actor, id string) (domain.AgentStats, error) {
	ag, err := s.Get(ctx, actor, id)
	if err != nil {
		return domain.AgentStats{}, err
	}
	st, err := s.store.AgentStats(ctx, ag.AccountID, ag.ID)
	if err != nil {
		return domain.AgentStats{}, fmt.Errorf("agent stats: %w", err)
	}
	st.AgentID = ag.ID
	return st, nil
}
