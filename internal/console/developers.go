package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// keyRow is a key as the console shows it; never its hash.
type keyRow struct {
	ID, Name, Description, Prefix, Env string
	Scopes                             []string
	Agents                             []string // names; empty: every agent
	CreatedBy                          string
	CreatedAt                          time.Time
	LastUsedAt, ExpiresAt, RevokedAt   *time.Time
	Status                             string
	RateLimit                          int
	RotatedFrom                        string
}

// directory resolves user and agent ids to what the console shows.
type directory struct {
	users  map[string]string
	agents map[string]string
}

func (c *Console) directory(ctx context.Context, accountID string) (directory, error) {
	d := directory{users: map[string]string{}}
	us, err := c.store.ListUsers(ctx, accountID)
	if err != nil {
		return d, err
	}
	for _, u := range us {
		d.users[u.ID] = u.Email
	}
	// Only agents that some key is restricted to ever need a name here; an
	// account may have far more agents than that.
	if d.agents, err = c.store.RestrictedAgentNames(ctx, accountID); err != nil {
		return d, err
	}
	return d, nil
}

func (d directory) row(k domain.APIKey, now time.Time) keyRow {
	r := keyRow{
		ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix, Env: string(k.Env),
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt,
		Status: string(k.Status(now)), RateLimit: k.RateLimitPerMinute, RotatedFrom: k.RotatedFrom,
	}
	for _, s := range k.Scopes {
		r.Scopes = append(r.Scopes, string(s))
	}
	for _, id := range k.AgentIDs {
		name, ok := d.agents[id]
		if !ok {
			name = id
		}
		r.Agents = append(r.Agents, name)
	}
	switch {
	case k.CreatedBy == "":
		r.CreatedBy = "support"
	case d.users[k.CreatedBy] != "":
		r.CreatedBy = d.users[k.CreatedBy]
	default:
		r.CreatedBy = k.CreatedBy
	}
	return r
}

type keysPage struct {
	// Leaks: keys revoked as leaked lately, for the banner (leaks.go).
	Leaks []leakRow

	Keys   []keyRow
	Recent []auditRow
}

// recentEvents is how many audit events the Developers page shows.
const recentEvents = 5

func (c *Console) handleKeys(w http.ResponseWriter, r *http.Request, s *session) error {
	ks, err := c.keys.List(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	d, err := c.directory(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	now := c.now()
	p := keysPage{}
	// Newest first: the key just made or rotated is at the top.
	for i := len(ks) - 1; i >= 0; i-- {
		p.Keys = append(p.Keys, d.row(ks[i], now))
	}
	events, err := c.store.ListAuditEvents(r.Context(), s.user.AccountID, recentEvents)
	if err != nil {
		return err
	}
	names := keyNames(ks)
	for _, ev := range events {
		p.Recent = append(p.Recent, auditRowOf(ev, names))
	}
	if p.Leaks, err = c.leakRows(r.Context(), s.user.AccountID, now); err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "keys", "API keys", p)
	return nil
}

// --- create ---

type option struct {
	Value, Label string
	Checked      bool
}

type newKeyPage struct {
	Name, Description string
	Presets           []option
	Scopes            []option
	Agents            []option
	Expiry            []option
	ExpiresAt         string
	Env               []option
	Error             string
}

// form is what the create form posted.
type keyForm struct {
	name, description, preset, expiry, expiresAt, env string
	scopes, agents                                    []string
}

func readKeyForm(r *http.Request) keyForm {
	f := r.PostForm
	return keyForm{
		name: f.Get("name"), description: f.Get("description"), preset: f.Get("preset"),
		expiry: f.Get("expiry"), expiresAt: f.Get("expires_at"), env: f.Get("env"),
		scopes: f["scope"], agents: f["agent"],
	}
}

var expiryChoices = []option{
	{Value: "never", Label: "Never"},
	{Value: "7", Label: "In 7 days"},
	{Value: "30", Label: "In 30 days"},
	{Value: "90", Label: "In 90 days"},
	{Value: "365", Label: "In 1 year"},
	{Value: "custom", Label: "On a date (UTC)"},
}

func (c *Console) newKeyPage(ctx context.Context, accountID string, f keyForm) (newKeyPage, error) {
	if f.preset == "" {
		f.preset = domain.Presets[0].ID
	}
	if f.expiry == "" {
		f.expiry = "never"
	}
	p := newKeyPage{Name: f.name, Description: f.description, ExpiresAt: f.expiresAt}
	for _, pr := range domain.Presets {
		scopes := make([]string, len(pr.Scopes))
		for i, s := range pr.Scopes {
			scopes[i] = string(s)
		}
		label := pr.Label + " — " + strings.Join(scopes, ", ")
		if pr.ID == "full-access" {
			label = pr.Label + " — every scope"
		}
		p.Presets = append(p.Presets, option{Value: pr.ID, Label: label, Checked: f.preset == pr.ID})
	}
	p.Presets = append(p.Presets, option{Value: "custom", Label: "Custom — choose scopes one by one", Checked: f.preset == "custom"})
	for _, s := range domain.Scopes {
		p.Scopes = append(p.Scopes, option{Value: string(s), Label: string(s), Checked: slices.Contains(f.scopes, string(s))})
	}
	agents, err := c.store.ListAgents(ctx, store.AgentQuery{AccountID: accountID})
	if err != nil {
		return p, err
	}
	for _, a := range agents {
		label := a.Name
		if !a.Enabled {
			label += " (disabled)"
		}
		p.Agents = append(p.Agents, option{Value: a.ID, Label: label, Checked: slices.Contains(f.agents, a.ID)})
	}
	for _, e := range expiryChoices {
		e.Checked = e.Value == f.expiry
		p.Expiry = append(p.Expiry, e)
	}
	for _, e := range []domain.Env{domain.EnvLive, domain.EnvTest} {
		p.Env = append(p.Env, option{Value: string(e), Label: string(e), Checked: string(e) == f.env || (f.env == "" && e == domain.EnvLive)})
	}
	return p, nil
}

func (c *Console) handleNewKeyForm(w http.ResponseWriter, r *http.Request, s *session) error {
	p, err := c.newKeyPage(r.Context(), s.user.AccountID, keyForm{})
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "newkey", "Create an API key", p)
	return nil
}

// showNewKeyForm is the create form again, as posted, with what to fix.
func (c *Console) showNewKeyForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	p, err := c.newKeyPage(r.Context(), s.user.AccountID, readKeyForm(r))
	if err != nil {
		return err
	}
	p.Error = e.Message
	c.render(w, r, s, e.Status, "newkey", "Create an API key", p)
	return nil
}

// params turns the form into the service's parameters, or says what the
// user must fix, and where.
func (f keyForm) params(accountID string, now time.Time) (keys.CreateParams, error) {
	p := keys.CreateParams{AccountID: accountID, Name: f.name, Description: f.description, AgentIDs: f.agents}
	switch f.preset {
	case "custom":
		for _, s := range f.scopes {
			p.Scopes = append(p.Scopes, domain.Scope(s))
		}
		if len(p.Scopes) == 0 {
			return p, fieldError("scope", "Choose at least one scope for a custom key.")
		}
	default:
		pr, ok := domain.PresetByID(f.preset)
		if !ok {
			return p, fieldError("preset", "Choose a preset or Custom.")
		}
		p.Scopes = pr.Scopes
	}
	env, ok := domain.ParseEnv(f.env)
	if !ok {
		return p, fieldError("env", "Choose live or test.")
	}
	p.Env = env
	switch f.expiry {
	case "", "never":
	case "custom":
		t, err := time.ParseInLocation("2006-01-02T15:04", f.expiresAt, time.UTC)
		if err != nil {
			return p, fieldError("expires_at", "Give the expiry as a date and time (UTC).")
		}
		p.ExpiresAt = &t
	default:
		days, err := strconv.Atoi(f.expiry)
		if err != nil || !slices.ContainsFunc(expiryChoices, func(o option) bool { return o.Value == f.expiry }) {
			return p, fieldError("expiry", "Choose when the key expires.")
		}
		t := now.AddDate(0, 0, days)
		p.ExpiresAt = &t
	}
	return p, nil
}

// createdPage shows a credential once: the page a create or rotation
// redirects to (reveal.go), sent with Cache-Control: no-store.
type createdPage struct {
	Key        keyRow
	Credential string
	Old        *keyRow // set after a rotation
}

func (c *Console) handleCreateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	params, err := readKeyForm(r).params(s.user.AccountID, c.now())
	if err != nil {
		return err
	}
	u := s.user
	created, err := c.keys.Create(r.Context(), keys.Actor{User: &u}, params)
	if de := (*domain.Error)(nil); errors.As(err, &de) && de.Code == domain.CodeNotFound {
		// The one thing a create names that may not exist: an AI agent of
		// the restriction. It is the form's to fix, not a missing page.
		return fieldError("agent", capitalize(strings.TrimSuffix(de.Message, "."))+".")
	}
	if err != nil {
		return err
	}
	c.log.Info("console key created", "key_prefix", created.Key.Prefix, "user_id", u.ID)
	return c.reveal(w, r, s, created)
}

// --- one key, rotation, revocation ---

type keyPage struct {
	Key        keyRow
	Lineage    []keyRow // the key it replaced and the keys that replace it
	Events     []auditRow
	Revokeable bool
}

func (c *Console) handleKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := c.keys.Get(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	all, err := c.keys.List(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	d, err := c.directory(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	now := c.now()
	p := keyPage{Key: d.row(k, now), Revokeable: k.RevokedAt == nil}
	for _, o := range all {
		if o.ID == k.RotatedFrom || o.RotatedFrom == k.ID {
			p.Lineage = append(p.Lineage, d.row(o, now))
		}
	}
	events, err := c.store.ListKeyAuditEvents(r.Context(), s.user.AccountID, k.ID)
	if err != nil {
		return err
	}
	names := keyNames(all)
	for _, ev := range events {
		p.Events = append(p.Events, auditRowOf(ev, names))
	}
	c.render(w, r, s, http.StatusOK, "key", k.Name, p)
	return nil
}

func (c *Console) handleRotateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	u := s.user
	id := r.PathValue("id")
	created, err := c.keys.Rotate(r.Context(), keys.Actor{User: &u}, s.user.AccountID, id, nil)
	if err != nil {
		return err
	}
	c.log.Info("console key rotated", "key_prefix", created.Key.Prefix, "old_key_id", id, "user_id", u.ID)
	return c.reveal(w, r, s, created)
}

func (c *Console) handleRevokeForm(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := c.keys.Get(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	d, err := c.directory(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "revoke", "Revoke "+k.Name, keyPage{Key: d.row(k, c.now()), Revokeable: k.RevokedAt == nil})
	return nil
}

func (c *Console) handleRevokeKey(w http.ResponseWriter, r *http.Request, s *session) error {
	u := s.user
	id := r.PathValue("id")
	if err := c.keys.Revoke(r.Context(), keys.Actor{User: &u}, s.user.AccountID, id); err != nil {
		return err
	}
	c.log.Info("console key revoked", "key_id", id, "user_id", u.ID)
	http.Redirect(w, r, "/console/developers/keys/"+id+"?done=revoked", http.StatusSeeOther)
	return nil
}

// --- audit trail ---

type auditRow struct {
	At                        time.Time
	Action, Actor, Detail     string
	KeyID, KeyName, KeyPrefix string
}

type keyName struct{ name, prefix string }

func keyNames(ks []domain.APIKey) map[string]keyName {
	m := make(map[string]keyName, len(ks))
	for _, k := range ks {
		m[k.ID] = keyName{k.Name, k.Prefix}
	}
	return m
}

var actionLabels = map[string]string{
	"created":            "created",
	"rotated":            "rotated",
	"revoked":            "revoked",
	"expired_in_use":     "expired in use",
	"rate_limit_changed": "rate limit changed",
}

func auditRowOf(ev domain.AuditEvent, names map[string]keyName) auditRow {
	label := actionLabels[ev.Action]
	if label == "" {
		label = ev.Action
	}
	n := names[ev.KeyID]
	return auditRow{At: ev.CreatedAt, Action: label, Actor: ev.Actor, Detail: ev.Detail,
		KeyID: ev.KeyID, KeyName: n.name, KeyPrefix: n.prefix}
}

type auditPage struct {
	Events []auditRow
}

// auditLimit bounds the page; the store keeps every event.
const auditLimit = 500

func (c *Console) handleAudit(w http.ResponseWriter, r *http.Request, s *session) error {
	events, err := c.store.ListAuditEvents(r.Context(), s.user.AccountID, auditLimit)
	if err != nil {
		return err
	}
	ks, err := c.keys.List(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	names := keyNames(ks)
	p := auditPage{}
	for _, ev := range events {
		p.Events = append(p.Events, auditRowOf(ev, names))
	}
	c.render(w, r, s, http.StatusOK, "audit", "Audit trail", p)
	return nil
}
