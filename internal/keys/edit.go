package keys

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Access is what a key may do after creation: its scopes, the AI agents
// it is restricted to (none: every agent) and when it expires (nil: never).
type Access struct {
	Scopes    []domain.Scope
	AgentIDs  []string
	ExpiresAt *time.Time
}

// SetAccess changes a key's scopes, agent restriction and expiry by the
// rules of Create, except that an expiry only comes earlier, never later
// (a later one is refused on the field expires_at). It records one
// "access_changed" event naming each part that changed with its before
// and after; changing nothing records nothing. The change applies on the
// key's next request on every instance (the store bumps the key epoch). A
// revoked key cannot change.
func (s *Service) SetAccess(ctx context.Context, actor Actor, accountID, keyID string, a Access) (domain.APIKey, error) {
	if actor.User != nil && actor.User.AccountID != accountID {
		return domain.APIKey{}, domain.Errorf(domain.CodeAccessDenied, "%s is not a user of account %s", actor.label(), accountID)
	}
	k, err := s.Get(ctx, accountID, keyID)
	if err != nil {
		return k, err
	}
	if k.RevokedAt != nil {
		return k, revokedErr(keyID, "its access")
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	next, err := s.validAccess(ctx, k, a, now)
	if err != nil {
		return k, err
	}
	detail, err := s.describeAccess(ctx, k, next)
	if err != nil || detail == "" {
		return k, err
	}
	ev := actor.event(accountID, keyID, domain.AuditAccessChanged, detail, now)
	err = s.store.UpdateKeyAccess(ctx, accountID, keyID, next.Scopes, next.AgentIDs, next.ExpiresAt, ev)
	if errors.Is(err, domain.ErrRevoked) { // since it was read
		return k, revokedErr(keyID, "its access")
	}
	if errors.Is(err, domain.ErrNotFound) {
		// Its expiry brought earlier since it was read.
		return k, domain.Errorf(domain.CodeInconsistentState, "key %s changed meanwhile; reload it and try again", keyID)
	}
	if err != nil {
		return k, fmt.Errorf("set key access: %w", err)
	}
	k.Scopes, k.AgentIDs, k.ExpiresAt = next.Scopes, next.AgentIDs, next.ExpiresAt
	return k, nil
}

// Edit is one save of a key's edit form: Access and AllowedIPs, when set,
// change an unrevoked key's (a revoked key keeps them); the name and
// description always apply.
type Edit struct {
	Access            *Access
	AllowedIPs        *domain.AllowList
	Name, Description string
}

// Edit checks every part of e before anything is written, then saves them
// in one transaction: each changed part has its audit entry (as SetAccess,
// SetAllowedIPs and Rename record them), and the whole save one
// api_key.updated event. Changing nothing writes nothing.
func (s *Service) Edit(ctx context.Context, actor Actor, accountID, keyID string, e Edit) (domain.APIKey, error) {
	if actor.User != nil && actor.User.AccountID != accountID {
		return domain.APIKey{}, domain.Errorf(domain.CodeAccessDenied, "%s is not a user of account %s", actor.label(), accountID)
	}
	k, err := s.Get(ctx, accountID, keyID)
	if err != nil {
		return k, err
	}
	name, desc, err := checkText(e.Name, e.Description)
	if err != nil {
		return k, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	edit, evs, err := s.editParts(ctx, actor, k, e, now)
	if err != nil {
		return k, err
	}
	if ev, changed := renameEvent(actor, k, name, desc, now); changed {
		evs = append(evs, ev)
		edit.Name, edit.Description = &name, desc
	}
	if len(evs) == 0 {
		return k, nil
	}
	err = s.store.UpdateKey(ctx, accountID, keyID, edit, evs)
	if errors.Is(err, domain.ErrRevoked) { // since it was read
		return k, revokedErr(keyID, "its access and allowed addresses")
	}
	if errors.Is(err, domain.ErrNotFound) {
		return k, domain.Errorf(domain.CodeInconsistentState, "key %s changed meanwhile; reload it and try again", keyID)
	}
	if err != nil {
		return k, fmt.Errorf("edit key: %w", err)
	}
	return s.Get(ctx, accountID, keyID)
}

// editParts checks e's access and allowed addresses against k (an
// unrevoked key's only) and returns what changes, with an audit entry each.
func (s *Service) editParts(ctx context.Context, actor Actor, k domain.APIKey, e Edit, now time.Time) (store.KeyEdit, []domain.AuditEvent, error) {
	var (
		edit store.KeyEdit
		evs  []domain.AuditEvent
	)
	if k.RevokedAt != nil {
		return edit, nil, nil
	}
	if e.Access != nil {
		next, err := s.validAccess(ctx, k, *e.Access, now)
		if err != nil {
			return edit, nil, err
		}
		detail, err := s.describeAccess(ctx, k, next)
		if err != nil {
			return edit, nil, err
		}
		if detail != "" {
			evs = append(evs, actor.event(k.AccountID, k.ID, domain.AuditAccessChanged, detail, now))
			edit.Access = &store.KeyAccess{Scopes: next.Scopes, AgentIDs: next.AgentIDs, ExpiresAt: next.ExpiresAt}
		}
	}
	if e.AllowedIPs != nil {
		list, err := domain.NewAllowList(e.AllowedIPs.Strings())
		if err != nil {
			return edit, nil, err
		}
		if !slices.Equal(k.AllowedIPs, list) {
			detail := describeAllowList(k.AllowedIPs) + " → " + describeAllowList(list)
			evs = append(evs, actor.event(k.AccountID, k.ID, domain.AuditAllowedIPsChanged, detail, now))
			edit.AllowedIPs = &list
		}
	}
	return edit, evs, nil
}

// validAccess is a as stored: Create's rules for scopes, agents and a
// future expiry (validate, with k's own settings for the rest), and the
// expiry no later than k's.
func (s *Service) validAccess(ctx context.Context, k domain.APIKey, a Access, now time.Time) (Access, error) {
	// An expiry left as it is may have passed: only a new one must be in
	// the future.
	keep := a.ExpiresAt != nil && k.ExpiresAt != nil && a.ExpiresAt.Equal(*k.ExpiresAt)
	p := CreateParams{AccountID: k.AccountID, Name: "key", Scopes: a.Scopes, AgentIDs: a.AgentIDs,
		ExpiresAt: a.ExpiresAt, RateLimit: k.RateLimitPerMinute, Env: k.Env}
	if keep {
		p.ExpiresAt = nil
	}
	v, err := s.validate(ctx, p, now)
	if err != nil {
		return Access{}, err
	}
	if keep {
		v.ExpiresAt = k.ExpiresAt
	}
	if k.ExpiresAt != nil && (v.ExpiresAt == nil || v.ExpiresAt.After(*k.ExpiresAt)) {
		return Access{}, fieldErr("expires_at", domain.CodeInvalidValue, "an expiry can only be brought earlier than %s", stamp(k.ExpiresAt))
	}
	return Access{Scopes: v.Scopes, AgentIDs: v.AgentIDs, ExpiresAt: v.ExpiresAt}, nil
}

// describeAccess is the audit detail of the change from k to a: each part
// that changes, before → after; "" when nothing does.
func (s *Service) describeAccess(ctx context.Context, k domain.APIKey, a Access) (string, error) {
	var parts []string
	if !slices.Equal(k.Scopes, a.Scopes) {
		parts = append(parts, "scopes: "+joinScopes(k.Scopes)+" → "+joinScopes(a.Scopes))
	}
	if !slices.Equal(k.AgentIDs, a.AgentIDs) {
		names, err := s.store.AgentNames(ctx, k.AccountID, append(slices.Clone(k.AgentIDs), a.AgentIDs...))
		if err != nil {
			return "", fmt.Errorf("agent names: %w", err)
		}
		parts = append(parts, "AI agents: "+agentList(k.AgentIDs, names)+" → "+agentList(a.AgentIDs, names))
	}
	if stamp(k.ExpiresAt) != stamp(a.ExpiresAt) {
		parts = append(parts, "expires: "+stamp(k.ExpiresAt)+" → "+stamp(a.ExpiresAt))
	}
	return strings.Join(parts, "; "), nil
}

func joinScopes(l []domain.Scope) string {
	out := make([]string, len(l))
	for i, sc := range l {
		out[i] = string(sc)
	}
	return strings.Join(out, ", ")
}

// agentList names a restriction in the trail: quoted names (an id when
// the agent is gone), or "every AI agent".
func agentList(ids []string, names map[string]string) string {
	if len(ids) == 0 {
		return "every AI agent"
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if n, ok := names[id]; ok {
			out[i] = strconv.Quote(n)
		}
	}
	return strings.Join(out, ", ")
}

// stamp is an expiry as the trail shows it.
func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// CheckText says whether Rename would take name and description, without
// reading or writing anything: a form that saves more than the text asks
// first, so that a refused name changes nothing.
func CheckText(name, description string) error {
	_, _, err := checkText(name, description)
	return err
}
