// Package keys owns the API key lifecycle: who may create, rotate and revoke
// keys, with what settings, and the audit trail of it. The operator CLI and
// the console both go through Service, so the role rule lives in one place.
// It also decides whether a presented credential may be used (Authenticator,
// which the API asks on every request).
package keys

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Limits on what a key may be given.
const (
	MaxNameLength        = domain.MaxNameLength
	MaxDescriptionLength = 1000
	MaxAgents            = 1000
)

// Service creates, rotates, revokes and lists keys.
type Service struct {
	store *store.Store
	now   func() time.Time
}

// New returns a Service; now is the clock (time.Now when nil).
func New(st *store.Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, now: now}
}

// Actor is who asks for a change: a user of the account, or support tooling.
type Actor struct {
	User    *domain.User // nil for support tooling
	Support bool
}

func (a Actor) id() string {
	if a.User != nil {
		return a.User.ID
	}
	return ""
}

func (a Actor) label() string {
	if a.User != nil {
		return a.User.Email
	}
	return "support"
}

// event is the audit event of the actor's action on key keyID at now.
func (a Actor) event(accountID, keyID string, action domain.AuditAction, detail string, now time.Time) domain.AuditEvent {
	return domain.AuditEvent{
		ID: domain.NewID(domain.PrefixEvent, now), AccountID: accountID, KeyID: keyID,
		Action: action, ActorID: a.id(), Actor: a.label(), Detail: detail, CreatedAt: now,
	}
}

// Manager returns the user with that email if they are an active Owner or
// Admin of the account. Anyone else, including a user of another account, is
// refused with access_denied; an unknown account is not_found.
func (s *Service) Manager(ctx context.Context, accountID, email string) (domain.User, error) {
	if _, err := s.account(ctx, accountID); err != nil {
		return domain.User{}, err
	}
	u, err := s.store.GetUserByEmail(ctx, domain.NormalizeEmail(email))
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return domain.User{}, fmt.Errorf("get user: %w", err)
	}
	if err != nil || u.AccountID != accountID || !u.Active || !u.Role.CanManageKeys() {
		return domain.User{}, domain.Errorf(domain.CodeAccessDenied, "%s is not an Owner or Admin of account %s", email, accountID)
	}
	return u, nil
}

func (s *Service) account(ctx context.Context, id string) (domain.Account, error) {
	a, err := s.store.GetAccount(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return a, domain.Errorf(domain.CodeNotFound, "no account %q", id)
	}
	if err != nil {
		return a, fmt.Errorf("get account: %w", err)
	}
	return a, nil
}

// CreateParams describe a new key.
type CreateParams struct {
	AccountID   string
	Name        string
	Description string
	Scopes      []domain.Scope
	AgentIDs    []string
	AllowedIPs  domain.AllowList // empty: any address
	ExpiresAt   *time.Time
	RateLimit   int // 0: the default
	Env         domain.Env
	rotatedFrom string
	retireAt    *time.Time // when the key rotatedFrom stops working
}

// Created is a new key and the credential, which exists only here.
type Created struct {
	Key        domain.APIKey
	Credential string
}

// Create makes a key. The actor must already be authorized for the account
// (see Manager), or be support.
func (s *Service) Create(ctx context.Context, actor Actor, p CreateParams) (Created, error) {
	if actor.User != nil && actor.User.AccountID != p.AccountID {
		return Created{}, domain.Errorf(domain.CodeAccessDenied, "%s is not a user of account %s", actor.label(), p.AccountID)
	}
	if _, err := s.account(ctx, p.AccountID); err != nil {
		return Created{}, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	k, err := s.validate(ctx, p, now)
	if err != nil {
		return Created{}, err
	}
	pol, err := s.Policy(ctx, p.AccountID)
	if err != nil {
		return Created{}, err
	}
	if err := checkPolicy(pol, k, now); err != nil {
		return Created{}, err
	}
	k.CreatedBy = actor.id()
	// A prefix collision (12 random base36 characters) is astronomically
	// rare, but the store refuses it rather than trusting luck: try again.
	for attempt := 0; ; attempt++ {
		cred, err := credential.Generate(k.Env)
		if err != nil {
			return Created{}, fmt.Errorf("generate credential: %w", err)
		}
		h := credential.Hash(cred.Text)
		k.ID = domain.NewID(domain.PrefixKey, now)
		k.Prefix = cred.Prefix
		k.Hash = h[:]
		evs := createdEvents(actor, p, k, now)
		if p.retireAt != nil {
			err = s.store.CreateKeyRetiring(ctx, k, p.rotatedFrom, *p.retireAt, evs...)
		} else {
			err = s.store.CreateKey(ctx, k, evs...)
		}
		var dup *domain.DuplicateError
		if errors.As(err, &dup) && attempt < 3 {
			continue
		}
		if err != nil {
			return Created{}, fmt.Errorf("create key: %w", err)
		}
		return Created{Key: k, Credential: cred.Text}, nil
	}
}

// createdEvents are the audit events of k's creation: on a rotation, one
// on each key.
func createdEvents(actor Actor, p CreateParams, k domain.APIKey, now time.Time) []domain.AuditEvent {
	action, detail := domain.AuditCreated, ""
	if p.rotatedFrom != "" {
		action, detail = domain.AuditRotated, "replaces "+p.rotatedFrom
	}
	evs := []domain.AuditEvent{actor.event(k.AccountID, k.ID, action, detail, now)}
	if p.rotatedFrom != "" {
		// The old key's own history says so too: its page is where a
		// rotation is started and checked.
		d := "replaced by " + k.ID
		if p.retireAt != nil {
			d += "; stops working " + p.retireAt.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		evs = append(evs, actor.event(k.AccountID, p.rotatedFrom, domain.AuditRotated, d, now))
	}
	return evs
}

// checkText applies the name rule (domain.CheckName) and the description
// rule, returning both as stored. An error names its field.
func checkText(rawName, rawDesc string) (name, desc string, err error) {
	name, problem := domain.CheckName(rawName)
	switch problem {
	case domain.NameNotUTF8:
		return "", "", fieldErr("name", domain.CodeInvalidValue, "a key name must be valid UTF-8 text")
	case domain.NameBlank:
		return "", "", fieldErr("name", domain.CodeMissingField, "a key needs a name")
	case domain.NameTooLong:
		return "", "", fieldErr("name", domain.CodeInvalidValue, "a key name has at most %d characters", MaxNameLength)
	case domain.NameControl:
		return "", "", fieldErr("name", domain.CodeInvalidValue, "a key name cannot contain control characters")
	case domain.NameInvisible:
		return "", "", fieldErr("name", domain.CodeInvalidValue, "a key name needs a visible character: bidirectional controls, zero-width characters and combining marks alone are not a name")
	}
	desc = strings.TrimSpace(rawDesc)
	if !utf8.ValidString(desc) {
		return "", "", fieldErr("description", domain.CodeInvalidValue, "a key description must be valid UTF-8 text")
	}
	switch domain.CheckText(desc, MaxDescriptionLength) {
	case domain.TextTooLong:
		return "", "", fieldErr("description", domain.CodeInvalidValue, "a key description has at most %d characters", MaxDescriptionLength)
	case domain.TextControl:
		return "", "", fieldErr("description", domain.CodeInvalidValue, "a key description cannot contain control characters other than line breaks and tabs")
	}
	return name, desc, nil
}

// fieldErr is an error of one field, which it names.
func fieldErr(field string, code domain.Code, format string, args ...any) error {
	e := domain.Errorf(code, format, args...)
	e.Fields = []domain.FieldError{{Field: field, Code: code, Message: e.Message}}
	return e
}

func (s *Service) validate(ctx context.Context, p CreateParams, now time.Time) (domain.APIKey, error) {
	name, desc, err := checkText(p.Name, p.Description)
	if err != nil {
		return domain.APIKey{}, err
	}
	if len(p.Scopes) == 0 {
		return domain.APIKey{}, domain.Errorf(domain.CodeMissingField, "a key needs at least one scope")
	}
	set := map[domain.Scope]bool{}
	for _, sc := range p.Scopes {
		if !domain.ValidScope(string(sc)) {
			return domain.APIKey{}, domain.Errorf(domain.CodeInvalidValue, "unknown scope %q", sc)
		}
		set[sc] = true
	}
	env := cmp.Or(p.Env, domain.EnvLive)
	if _, ok := domain.ParseEnv(string(env)); !ok {
		return domain.APIKey{}, domain.Errorf(domain.CodeInvalidValue, "env must be live or test")
	}
	limit := cmp.Or(p.RateLimit, domain.DefaultRateLimitPerMinute)
	if limit < 1 || limit > domain.MaxRateLimitPerMinute {
		return domain.APIKey{}, domain.Errorf(domain.CodeInvalidValue, "rate limit must be between 1 and %d requests a minute", domain.MaxRateLimitPerMinute)
	}
	var expires *time.Time
	if p.ExpiresAt != nil {
		e := p.ExpiresAt.UTC().Truncate(time.Millisecond)
		if !e.After(now) {
			return domain.APIKey{}, domain.Errorf(domain.CodeInvalidValue, "expiry must be in the future")
		}
		expires = &e
	}
	agents, err := s.restriction(ctx, p.AccountID, p.AgentIDs)
	if err != nil {
		return domain.APIKey{}, err
	}
	allowed, err := domain.NewAllowList(p.AllowedIPs.Strings())
	if err != nil {
		return domain.APIKey{}, err
	}
	return domain.APIKey{
		AccountID: p.AccountID, Name: name, Description: desc, Env: env,
		Scopes: domain.NormalizeScopes(set), AgentIDs: agents, AllowedIPs: allowed, RateLimitPerMinute: limit,
		ExpiresAt: expires, CreatedAt: now, RotatedFrom: p.rotatedFrom,
	}, nil
}

// restriction is the agent restriction ids asks for: each an agent of the
// account, once.
func (s *Service) restriction(ctx context.Context, accountID string, ids []string) ([]string, error) {
	var agents []string
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			// A blank entry ("--agents ,") must not quietly leave the key
			// unrestricted.
			return nil, domain.Errorf(domain.CodeInvalidValue, "an AI agent id of the restriction is empty")
		}
		if slices.Contains(agents, id) {
			continue
		}
		if _, err := s.store.GetAgent(ctx, accountID, id); errors.Is(err, domain.ErrNotFound) {
			return nil, domain.Errorf(domain.CodeNotFound, "no AI agent %q in account %s", id, accountID)
		} else if err != nil {
			return nil, fmt.Errorf("get agent: %w", err)
		}
		agents = append(agents, id)
	}
	if len(agents) > MaxAgents {
		return nil, domain.Errorf(domain.CodeInvalidValue, "a key may be restricted to at most %d AI agents", MaxAgents)
	}
	return agents, nil
}

// Rotate creates a second key with the same scopes, restriction, IP
// allowlist, rate limit, env and expiry policy as keyID. oldStopsIn says when keyID stops working:
// nil leaves it active until it is revoked by hand, so traffic can move
// first; otherwise its expires_at becomes now plus that (0: at once), in the
// same transaction, unless it expires sooner already. A key that expired
// keeps its lifetime: the new key gets the same duration from now. The new
// key's name is the old one's base name with "(rotated DATE)", so rotating
// a rotated key replaces the suffix, and is never another key's name.
// Under the account's key policy the new key is a new key like any other
// (rotationWithinPolicy): its expiry is brought within the maximum
// lifetime, and a key without allowed addresses where they are required
// is not rotated.
func (s *Service) Rotate(ctx context.Context, actor Actor, accountID, keyID string, oldStopsIn *time.Duration) (Created, error) {
	if oldStopsIn != nil && *oldStopsIn < 0 {
		return Created{}, domain.Errorf(domain.CodeInvalidValue, "when the old key stops working cannot be in the past")
	}
	old, err := s.Get(ctx, accountID, keyID)
	if err != nil {
		return Created{}, err
	}
	if old.RevokedAt != nil {
		return Created{}, domain.Errorf(domain.CodeImmutableState, "key %s is revoked; create a new key instead", keyID)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	name, err := s.rotatedName(ctx, accountID, strings.ToValidUTF8(old.Name, "\uFFFD"), now)
	if err != nil {
		return Created{}, err
	}
	p := CreateParams{
		AccountID: accountID, Name: name, Description: textOnly(old.Description), rotatedFrom: old.ID,
		Scopes: old.Scopes, AgentIDs: old.AgentIDs, AllowedIPs: old.AllowedIPs, RateLimit: old.RateLimitPerMinute, Env: old.Env,
	}
	if old.ExpiresAt != nil {
		e := s.now().Add(old.ExpiresAt.Sub(old.CreatedAt))
		p.ExpiresAt = &e
	}
	if err := s.rotationWithinPolicy(ctx, old, &p, now); err != nil {
		return Created{}, err
	}
	if oldStopsIn != nil {
		at := now.Add(*oldStopsIn)
		if old.ExpiresAt == nil || old.ExpiresAt.After(at) {
			p.retireAt = &at
		}
	}
	return s.Create(ctx, actor, p)
}

// textOnly is s as a description may be now: a key made before that rule
// may hold bytes that are not UTF-8 or control characters, which must not
// stop it from being rotated.
func textOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if domain.IsTextControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// rotatedSuffix matches what rotatedName appends (and the " (rotated)" of
// earlier releases), so that it is replaced, not appended to.
var rotatedSuffix = regexp.MustCompile(` \(rotated(?: \d{4}-\d{2}-\d{2}(?:, \d+)?)?\)$`)

// rotatedName is "BASE (rotated YYYY-MM-DD)", or "BASE (rotated
// YYYY-MM-DD, N)" with the smallest N from 2 that no key of the account is
// named, BASE being name without such a suffix, shortened to fit
// MaxNameLength.
func (s *Service) rotatedName(ctx context.Context, accountID, name string, now time.Time) (string, error) {
	base := strings.TrimSpace(rotatedSuffix.ReplaceAllString(name, ""))
	date := now.Format("2006-01-02")
	for n := 1; n < 1000; n++ {
		suffix := " (rotated " + date + ")"
		if n > 1 {
			suffix = " (rotated " + date + ", " + strconv.Itoa(n) + ")"
		}
		b := base
		if room := MaxNameLength - utf8.RuneCountInString(suffix); utf8.RuneCountInString(b) > room {
			b = strings.TrimSpace(string([]rune(b)[:room]))
		}
		candidate := b + suffix
		taken, err := s.store.KeyNameTaken(ctx, accountID, candidate)
		if err != nil {
			return "", fmt.Errorf("rotated name: %w", err)
		}
		if !taken {
			return candidate, nil
		}
	}
	return "", domain.Errorf(domain.CodeInconsistentState, "this key was rotated too often today; rename it first")
}

// Rename sets a key's name and description (the description may be
// empty), by the rules of Create, and records it in the audit trail:
// "renamed" with the old and new name, and/or "description changed".
// Changing nothing records nothing. A revoked key can be renamed too: its
// name is how its history is read.
func (s *Service) Rename(ctx context.Context, actor Actor, accountID, keyID, name, description string) (domain.APIKey, error) {
	if actor.User != nil && actor.User.AccountID != accountID {
		return domain.APIKey{}, domain.Errorf(domain.CodeAccessDenied, "%s is not a user of account %s", actor.label(), accountID)
	}
	k, err := s.Get(ctx, accountID, keyID)
	if err != nil {
		return k, err
	}
	name, desc, err := checkText(name, description)
	if err != nil {
		return k, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	ev, changed := renameEvent(actor, k, name, desc, now)
	if !changed {
		return k, nil
	}
	err = s.store.UpdateKeyText(ctx, accountID, keyID, name, desc, ev)
	if err := keyError(err, "rename key", accountID, keyID); err != nil {
		return k, err
	}
	k.Name, k.Description = name, desc
	return k, nil
}

// renameEvent is the audit entry of k's name and description becoming name
// and desc, and whether they change at all.
func renameEvent(actor Actor, k domain.APIKey, name, desc string, now time.Time) (domain.AuditEvent, bool) {
	var details []string
	action := domain.AuditRenamed
	if name != k.Name {
		details = append(details, strconv.Quote(k.Name)+" → "+strconv.Quote(name))
	}
	if desc != k.Description {
		if len(details) == 0 {
			action = domain.AuditDescriptionChanged
		} else {
			details = append(details, "description changed")
		}
	}
	if name == k.Name && desc == k.Description {
		return domain.AuditEvent{}, false
	}
	return actor.event(k.AccountID, k.ID, action, strings.Join(details, "; "), now), true
}

// Get returns a key of the account; not_found otherwise.
func (s *Service) Get(ctx context.Context, accountID, keyID string) (domain.APIKey, error) {
	k, err := s.store.GetKey(ctx, accountID, keyID)
	return k, keyError(err, "get key", accountID, keyID)
}

// keyError is err from op on key keyID of the account: not_found for
// domain.ErrNotFound, nil for nil.
func keyError(err error, op, accountID, keyID string) error {
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Errorf(domain.CodeNotFound, "no API key %q in account %s", keyID, accountID)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Revoke revokes a key of the account at once, on every instance: the next
// request with it gets 401. Revoking a revoked key changes nothing.
func (s *Service) Revoke(ctx context.Context, actor Actor, accountID, keyID string) error {
	if actor.User != nil && actor.User.AccountID != accountID {
		return domain.Errorf(domain.CodeAccessDenied, "%s is not a user of account %s", actor.label(), accountID)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	ev := actor.event(accountID, keyID, domain.AuditRevoked, "", now)
	err := s.store.RevokeKey(ctx, accountID, keyID, actor.id(), now, ev)
	return keyError(err, "revoke key", accountID, keyID)
}

// SetRateLimit changes a key's ceiling; support only. It applies on the
// key's next request, on every instance, because the ceiling is read with
// the key. A revoked key's ceiling cannot change: it is used no more.
func (s *Service) SetRateLimit(ctx context.Context, keyID string, n int) error {
	if n < 1 || n > domain.MaxRateLimitPerMinute {
		return domain.Errorf(domain.CodeInvalidValue, "rate limit must be between 1 and %d requests a minute", domain.MaxRateLimitPerMinute)
	}
	k, err := s.store.GetKeyByID(ctx, keyID)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Errorf(domain.CodeNotFound, "no API key %q", keyID)
	}
	if err != nil {
		return fmt.Errorf("get key: %w", err)
	}
	if k.RevokedAt != nil {
		return revokedErr(keyID, "its rate limit")
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	detail := fmt.Sprintf("%d → %d requests a minute", k.RateLimitPerMinute, n)
	ev := Actor{Support: true}.event(k.AccountID, k.ID, domain.AuditRateLimitChanged, detail, now)
	err = s.store.SetKeyRateLimit(ctx, keyID, n, ev)
	if errors.Is(err, domain.ErrRevoked) { // since it was read
		return revokedErr(keyID, "its rate limit")
	}
	if err != nil {
		return fmt.Errorf("set rate limit: %w", err)
	}
	return nil
}

// revokedErr refuses to change what of a revoked key. Every change but a
// new name refuses it, whether the key was revoked before the change read
// it or while the change was under way (the store's UPDATE requires the
// key unrevoked).
func revokedErr(keyID, what string) error {
	return domain.Errorf(domain.CodeImmutableState, "key %s is revoked; %s cannot change", keyID, what)
}

// List returns the account's keys, oldest first.
func (s *Service) List(ctx context.Context, accountID string) ([]domain.APIKey, error) {
	if _, err := s.account(ctx, accountID); err != nil {
		return nil, err
	}
	ks, err := s.store.ListKeys(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return ks, nil
}
