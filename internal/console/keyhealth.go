package console

import (
	"cmp"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// Key health and the key policy (docs/console.md, Key health and Key
// policy): each active key flagged for what makes it riskier than it needs
// to be, with what to do about it, from what api_keys holds (no per-request
// work); and the account's policy for new keys, which Owners set.

// Thresholds of the health flags.
const (
	// unusedFor: a key not used for this long is flagged as unused.
	unusedFor = 90 * 24 * time.Hour
	// neverUsedAfter: a key never used this long after it was made is
	// flagged (a key made today may not be deployed yet).
	neverUsedAfter = 7 * 24 * time.Hour
)

// healthFlag is one reason a key needs attention and what to do about it:
// Do, linked to Link.
type healthFlag struct {
	ID, What, Do, Link string
}

type healthRow struct {
	keyRow
	Flags []healthFlag
}

type healthPage struct {
	Rows    []healthRow
	Flagged int // rows with a flag
	Policy  domain.KeyPolicy
	Pager   pager
}

// keyHealth is the flags of the active key k at now.
func keyHealth(k keyRow, now time.Time) []healthFlag {
	edit := "/console/developers/keys/" + k.ID + "/edit"
	revoke := "/console/developers/keys/" + k.ID + "/revoke"
	var flags []healthFlag
	if k.ExpiresAt == nil {
		flags = append(flags, healthFlag{"no-expiry", "No expiry: it works until someone revokes it.", "Bring the expiry in", edit})
	}
	if k.Preset == "full-access" {
		flags = append(flags, healthFlag{"full-access", "Full access: every scope, webhooks included.", "Narrow the scopes", edit})
	}
	if len(k.AllowedIPs) == 0 {
		flags = append(flags, healthFlag{"any-address", "No allowed addresses: it works from anywhere.", "Add allowed addresses", edit})
	}
	switch {
	case k.LastUsedAt == nil && now.Sub(k.CreatedAt) > neverUsedAfter:
		flags = append(flags, healthFlag{"never-used", "Never used since it was made " + days(now.Sub(k.CreatedAt)) + " ago.", "Revoke it if nothing needs it", revoke})
	case k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) > unusedFor:
		flags = append(flags, healthFlag{"unused", "Unused for " + days(now.Sub(*k.LastUsedAt)) + ".", "Revoke it if nothing needs it", revoke})
	}
	return flags
}

// days is d in whole days, as "95 days".
func days(d time.Duration) string { return plural(int(d/(24*time.Hour)), "day") }

func (c *Console) handleKeyHealth(w http.ResponseWriter, r *http.Request, s *session) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	now := c.Now()
	acct := s.user.AccountID
	ks, next, err := c.Store.KeyPage(r.Context(), store.KeyPageQuery{AccountID: acct, Status: domain.KeyActive,
		Now: now, After: lp.After, Limit: pageSize})
	if err != nil {
		return err
	}
	at := func(k domain.APIKey) (time.Time, string) { return k.CreatedAt, k.ID }
	p := healthPage{Pager: pagerBoth("/console/developers/health", url.Values{}, lp, next, ks, at)}
	rows, err := c.keyRows(r.Context(), acct, now, ks...)
	if err != nil {
		return err
	}
	for _, k := range rows {
		row := healthRow{keyRow: k, Flags: keyHealth(k, now)}
		if len(row.Flags) > 0 {
			p.Flagged++
		}
		p.Rows = append(p.Rows, row)
	}
	if p.Policy, err = c.Keys.Policy(r.Context(), acct); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "health", "Key health", p)
}

type policyPage struct {
	Policy  domain.KeyPolicy
	CanEdit bool // an Owner: the form; an Admin reads it
	// The form's values, as posted or as the policy has them.
	MaxDays    string
	RequireIPs bool
	Min, Max   int
	formError
}

func (c *Console) showPolicy(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	pol, err := c.Keys.Policy(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	p := policyPage{Policy: pol, CanEdit: s.user.Role == domain.RoleOwner, RequireIPs: pol.RequireAllowedIPs,
		Min: domain.MinKeyLifetimeDays, Max: domain.MaxKeyLifetimeDays}
	if pol.MaxKeyLifetimeDays > 0 {
		p.MaxDays = strconv.Itoa(pol.MaxKeyLifetimeDays)
	}
	if r.Method == http.MethodPost {
		p.MaxDays, p.RequireIPs = r.PostForm.Get("max_key_lifetime_days"), r.PostForm.Get("require_allowed_ips") == "on"
	}
	return c.renderForm(w, r, s, e, "policy", "Key policy", &p)
}

// handleSetPolicy saves the policy form (Owners only, by the route's step
// and again by keys.Service.SetPolicy).
func (c *Console) handleSetPolicy(w http.ResponseWriter, r *http.Request, s *session) error {
	var pol domain.KeyPolicy
	if v := strings.TrimSpace(r.PostForm.Get("max_key_lifetime_days")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < domain.MinKeyLifetimeDays || n > domain.MaxKeyLifetimeDays {
			return fieldError("max_key_lifetime_days", "Give the maximum lifetime as "+strconv.Itoa(domain.MinKeyLifetimeDays)+
				" to "+strconv.Itoa(domain.MaxKeyLifetimeDays)+" days, or leave it empty for none.")
		}
		pol.MaxKeyLifetimeDays = n
	}
	switch r.PostForm.Get("require_allowed_ips") {
	case "", "on":
		pol.RequireAllowedIPs = r.PostForm.Get("require_allowed_ips") == "on"
	default:
		return errUnreadableForm
	}
	if _, err := c.Keys.SetPolicy(r.Context(), keys.Actor{User: &s.user}, s.user.AccountID, pol); err != nil {
		return err
	}
	c.Log.Info("console key policy saved", "user_id", s.user.ID)
	return seeOther("/console/developers/policy?done=policy")
}

// policyWords is the policy as the new-key form states it, "" when it
// asks nothing.
func policyWords(p domain.KeyPolicy) string {
	var parts []string
	if p.MaxKeyLifetimeDays > 0 {
		parts = append(parts, "expire within "+p.LifetimeWords())
	}
	if p.RequireAllowedIPs {
		parts = append(parts, "name allowed IP addresses")
	}
	if len(parts) == 0 {
		return ""
	}
	return "Your account's key policy: new keys must " + strings.Join(parts, " and ") + "."
}

// policyExpiries are the new-key form's expiry choices under p: those
// within its maximum lifetime (its maximum itself among them), the
// default the longest; without a maximum, every choice, Never the default.
func policyExpiries(p domain.KeyPolicy, chosen string) []option {
	if p.MaxKeyLifetimeDays == 0 {
		return choose(expiryChoices, cmp.Or(chosen, "never"))
	}
	var opts []option
	maxDays := strconv.Itoa(p.MaxKeyLifetimeDays)
	for _, o := range expiryChoices {
		days, err := strconv.Atoi(o.Value)
		switch {
		case o.Value == "custom":
			if !hasOption(opts, maxDays) {
				opts = append(opts, option{Value: maxDays, Label: "In " + p.LifetimeWords() + " (the most allowed)"})
			}
			opts = append(opts, o)
		case err == nil && days <= p.MaxKeyLifetimeDays:
			opts = append(opts, o)
		}
	}
	if chosen == "" || chosen == "never" {
		chosen = maxDays
	}
	return choose(opts, chosen)
}

func hasOption(opts []option, v string) bool {
	for _, o := range opts {
		if o.Value == v {
			return true
		}
	}
	return false
}

// rotationPolicyWords is what the account's policy p does to the key a
// rotation of k makes (keys.Service.Rotate), "" when nothing: it cannot be
// made without allowed addresses, and it expires within the maximum.
func rotationPolicyWords(p domain.KeyPolicy, k domain.APIKey) string {
	switch {
	case p.RequireAllowedIPs && len(k.AllowedIPs) == 0:
		return "Your account's key policy requires allowed IP addresses of new keys, and this key has none: add them (Edit), then rotate it."
	case p.MaxKeyLifetimeDays > 0 && (k.ExpiresAt == nil || k.ExpiresAt.Sub(k.CreatedAt) > p.MaxLifetime()):
		return "Your account's key policy: the new key expires within " + p.LifetimeWords() + ", sooner than this key's lifetime."
	}
	return ""
}
