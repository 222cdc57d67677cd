package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// keyRow is a key as the console shows it (its hash left out), with its
// creator and agents by name.
type keyRow struct {
	domain.APIKey
	Agents     []string // names; empty: every agent
	AllowedIPs []string // as people write them; empty: any address
	CreatedBy  string
	Status     domain.KeyStatus
	// ExpiresSoon: active, and expiring within expiresSoon.
	ExpiresSoon bool
	// Preset is the label of the preset granting exactly Scopes, else
	// "Custom", as the key form names them.
	Preset string
}

// expiresSoon is how close an expiry is marked on a key.
const expiresSoon = 7 * 24 * time.Hour

// keyRows are ks as rows at now: their creators and restricted agents
// named in one query each, bounded by the keys shown, not by the
// account's users or agents.
func (c *Console) keyRows(ctx context.Context, accountID string, now time.Time, ks ...domain.APIKey) ([]keyRow, error) {
	var userIDs, agentIDs []string
	for _, k := range ks {
		userIDs = append(userIDs, k.CreatedBy)
		agentIDs = append(agentIDs, k.AgentIDs...)
	}
	emails, err := c.Store.UserEmails(ctx, accountID, userIDs)
	if err != nil {
		return nil, err
	}
	names, err := c.Store.AgentNames(ctx, accountID, agentIDs)
	if err != nil {
		return nil, err
	}
	rows := make([]keyRow, len(ks))
	for i, k := range ks {
		k.Hash = nil
		r := keyRow{APIKey: k, Status: k.Status(now), AllowedIPs: k.AllowedIPs.Strings(), Preset: "Custom"}
		if pr, ok := presetOf(k.Scopes); ok {
			r.Preset = pr.Label
		}
		r.ExpiresSoon = r.Status == domain.KeyActive && k.ExpiresAt != nil && k.ExpiresAt.Sub(now) <= expiresSoon
		for _, id := range k.AgentIDs {
			r.Agents = append(r.Agents, cmp.Or(names[id], id))
		}
		// No creator: made by support tooling.
		r.CreatedBy = cmp.Or(emails[k.CreatedBy], k.CreatedBy, "support")
		rows[i] = r
	}
	return rows, nil
}

// keyLabels names, in one query, the account's keys that id picks out of
// rows.
func keyLabels[T any](ctx context.Context, st *store.Store, accountID string, rows []T, id func(T) string) (map[string]store.KeyLabel, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = id(r)
	}
	return st.KeyLabels(ctx, accountID, ids)
}

type keysPage struct {
	// Leaks: keys revoked as leaked lately, for the banner (leaks.go).
	Leaks []leakRow
	// Notices: the keys' anomalies not dismissed yet (notices.go).
	Notices noticeBlock

	Keys     []keyRow
	Recent   []auditRow
	Status   string
	Statuses []option
	Pager    pager
	// Active and Ended are Keys apart: active, then revoked and expired;
	// Activity is each key's last 24 hours; StillCalled the ended keys
	// called after they ended (keyslist.go).
	Active, Ended []listKey
	StillCalled   []stillCalled
}

// recentEvents is how many audit events the Developers page shows.
const recentEvents = 5

// keyStatuses are the list's status filter: "" is every key.
var keyStatuses = []option{
	{Value: "", Label: "All statuses"},
	{Value: string(domain.KeyActive), Label: "Active"},
	{Value: string(domain.KeyExpired), Label: "Expired"},
	{Value: string(domain.KeyRevoked), Label: "Revoked"},
}

func (c *Console) handleKeys(w http.ResponseWriter, r *http.Request, s *session) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	status := r.URL.Query().Get("status")
	if !slices.ContainsFunc(keyStatuses, func(o option) bool { return o.Value == status }) {
		return errBadPageLink
	}
	now := c.Now()
	// Newest first: the key just made or rotated is at the top.
	ks, next, err := c.Store.KeyPage(r.Context(), store.KeyPageQuery{AccountID: s.user.AccountID, Search: lp.Search,
		Status: domain.KeyStatus(status), Now: now, After: lp.After, Limit: pageSize})
	if err != nil {
		return err
	}
	at := func(k domain.APIKey) (time.Time, string) { return k.CreatedAt, k.ID }
	p := keysPage{Status: status, Statuses: choose(keyStatuses, status),
		Pager: pagerBoth("/console/developers", url.Values{"q": {lp.Search}, "status": {status}}, lp, next, ks, at)}
	if p.Keys, err = c.keyRows(r.Context(), s.user.AccountID, now, ks...); err != nil {
		return err
	}
	if lp.After.IsZero() && lp.Search == "" && status == "" {
		if p.Recent, _, err = c.auditRows(r, store.AuditPageQuery{AccountID: s.user.AccountID, Limit: recentEvents}); err != nil {
			return err
		}
	}
	if p.Leaks, err = c.leakRows(r.Context(), s.user.AccountID, now); err != nil {
		return err
	}
	if p.Notices, err = c.keyNotices(r.Context(), s.user.AccountID, ""); err != nil {
		return err
	}
	act, err := c.keyActivities(r.Context(), s.user.AccountID, now)
	if err != nil {
		return err
	}
	p.Active, p.Ended = splitKeys(p.Keys, act)
	if p.StillCalled, err = c.stillCalledKeys(r.Context(), s.user.AccountID, now, p.Ended); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "keys", "API keys", p)
}

type option struct {
	Value, Label string
	Checked      bool
	// Description and Reserved: a scope's (domain.Scope.Description).
	Description string
	Reserved    bool
	// Scopes is a preset's, space-separated, for console.js.
	Scopes string
}

// choose is a copy of opts with the option of value v checked.
func choose(opts []option, v string) []option {
	out := slices.Clone(opts)
	for i := range out {
		out[i].Checked = out[i].Value == v
	}
	return out
}

type newKeyPage struct {
	Name, Description string
	Presets           []option
	Scopes            []option
	// Selected are the agents the key is restricted to so far; Agents the
	// picker's current page of the others, AgentSearch its search and
	// AgentNext the cursor of its next page ("" on the last).
	Selected    []option
	Agents      []option
	AgentSearch string
	AgentNext   string
	NoAgents    bool
	Expiry      []option
	ExpiresAt   string
	Env         []option
	AllowedIPs  string
	// PolicyNote states the account's key policy on the create form
	// (keyhealth.go); "" when it asks nothing.
	PolicyNote string
	// Access is the scopes as a resource × access table (keyaccess.go).
	Access        []accessRow
	AccessColumns []string
	// AdvancedOpen unfolds the advanced options: something in them is set.
	AdvancedOpen bool
	// ExpiryNote says which expiries the edit form offers; RateLimit is
	// the edited key's.
	ExpiryNote string
	RateLimit  int
	formError
}

// keyForm is what the create form posted.
type keyForm struct {
	name, description, preset, expiry, expiresAt, env string
	allowedIPs                                        string
	scopes, agents                                    []string
	// op is the button that sent the form: "" or "create" creates the key;
	// "search-agents" and "more-agents" only re-show the form with the
	// agent picker searched or on its next page.
	op, agentSearch, agentAfter string
	// policyDays is the key policy's maximum lifetime, an expiry choice
	// the create form offers when it is not one of expiryChoices (0: none).
	policyDays int
}

func readKeyForm(r *http.Request) keyForm {
	f := r.PostForm
	return keyForm{
		name: f.Get("name"), description: f.Get("description"), preset: f.Get("preset"),
		expiry: f.Get("expiry"), expiresAt: f.Get("expires_at"), env: f.Get("env"), allowedIPs: f.Get("allowed_ips"),
		scopes: f["scope"], agents: f["agent"],
		op: f.Get("op"), agentSearch: strings.TrimSpace(f.Get("agent_q")), agentAfter: f.Get("agent_after"),
	}
}

// scopeChoice is what the form's preset and scope boxes ask for. The boxes
// are for scopes beyond a preset: ticking one that the chosen preset does
// not grant makes the key Custom, with the preset's scopes and the ticked
// ones (console.js flips the radio to Custom as it happens). Boxes that add
// nothing to the preset change nothing.
func (f keyForm) scopeChoice() (preset string, scopes []string) {
	pr, ok := domain.PresetByID(f.preset)
	if f.preset == "custom" || !ok {
		return f.preset, f.scopes
	}
	extra := slices.DeleteFunc(slices.Clone(f.scopes), func(sc string) bool { return slices.Contains(pr.Scopes, domain.Scope(sc)) })
	if len(extra) == 0 {
		return f.preset, nil
	}
	// In vocabulary order; unknown names stay in, for params to refuse.
	for _, sc := range domain.Scopes {
		if slices.Contains(pr.Scopes, sc) || slices.Contains(extra, string(sc)) {
			scopes = append(scopes, string(sc))
		}
	}
	for _, sc := range extra {
		if !domain.ValidScope(sc) {
			scopes = append(scopes, sc)
		}
	}
	return "custom", scopes
}

var envChoices = []option{
	{Value: string(domain.EnvLive), Label: string(domain.EnvLive)},
	{Value: string(domain.EnvTest), Label: string(domain.EnvTest)},
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
	f.preset = cmp.Or(f.preset, domain.Presets[0].ID)
	preset, ticked := f.scopeChoice()
	p := newKeyPage{Name: f.name, Description: f.description, ExpiresAt: f.expiresAt, AllowedIPs: f.allowedIPs}
	for _, pr := range domain.Presets {
		scopes := make([]string, len(pr.Scopes))
		for i, s := range pr.Scopes {
			scopes[i] = string(s)
		}
		p.Presets = append(p.Presets, option{Value: pr.ID, Label: pr.Label, Checked: preset == pr.ID, Scopes: strings.Join(scopes, " ")})
	}
	p.Presets = append(p.Presets, option{Value: "custom", Label: "Custom", Checked: preset == "custom"})
	if pr, ok := domain.PresetByID(preset); ok {
		// The table shows what the preset grants (console.js keeps it so).
		ticked = scopeNames(pr.Scopes)
	}
	for _, s := range domain.Scopes {
		p.Scopes = append(p.Scopes, option{Value: string(s), Label: string(s), Checked: slices.Contains(ticked, string(s)),
			Description: s.Description(), Reserved: s.Reserved()})
	}
	p.Access, p.AccessColumns = accessTable(p.Scopes)
	p.AdvancedOpen = len(f.agents) > 0 || strings.TrimSpace(f.allowedIPs) != "" || f.op == "search-agents" || f.op == "more-agents"
	if err := c.agentPicker(ctx, accountID, f, &p); err != nil {
		return p, err
	}
	p.Expiry = choose(expiryChoices, cmp.Or(f.expiry, "never"))
	p.Env = choose(envChoices, cmp.Or(f.env, string(domain.EnvLive)))
	return p, nil
}

// agentPicker fills the form's agent restriction: the account's agents
// ticked so far (at most keys.MaxAgents, each once, by name, one query),
// then a page of pageSize others, searched by name, in natural name order
// (untickedAgents), so an account with thousands of agents gets a short
// list and a search box rather than thousands of boxes.
func (c *Console) agentPicker(ctx context.Context, accountID string, f keyForm, p *newKeyPage) error {
	ids := f.agents[:min(len(f.agents), keys.MaxAgents)]
	names, err := c.Store.AgentNames(ctx, accountID, ids)
	if err != nil {
		return err
	}
	selected := map[string]bool{}
	for _, id := range ids {
		if name, ok := names[id]; ok && !selected[id] {
			selected[id] = true
			p.Selected = append(p.Selected, option{Value: id, Label: name, Checked: true})
		}
	}
	search, after := f.pickerQuery()
	p.AgentSearch = search
	if err := c.untickedAgents(ctx, accountID, search, after, selected, p); err != nil {
		return err
	}
	p.NoAgents = search == "" && after == "" && len(p.Agents) == 0 && len(p.Selected) == 0
	slices.SortFunc(p.Selected, byLabel)
	return nil
}

// byLabel orders options as people read their names (Agent 2 before
// Agent 10).
func byLabel(a, b option) int { return naturalCompare(a.Label, b.Label) }

// pickerQuery is the picker's search, cut to what the store searches by,
// and the page it starts after (only for its "more" button).
func (f keyForm) pickerQuery() (search, after string) {
	search = f.agentSearch
	if len(search) > store.MaxSearch {
		search = strings.ToValidUTF8(search[:store.MaxSearch], "")
	}
	if f.op == "more-agents" {
		after = f.agentAfter
	}
	return search, after
}

// pickerCap is the most agents found that the picker sorts as people
// read them (Agent 2 before Agent 10) over every page: it reads them all,
// at most pickerCap+1 rows. Beyond it the picker pages by the store's name
// key, and the search narrows the list.
const pickerCap = 2000

// untickedAgents lists in p.Agents a page of the agents found by search
// after after, those selected left out.
func (c *Console) untickedAgents(ctx context.Context, accountID, search, after string, selected map[string]bool, p *newKeyPage) error {
	all, next, err := c.Store.AgentPickerPage(ctx, accountID, search, "", pickerCap)
	if err != nil {
		return err
	}
	if next != "" {
		return c.storeAgents(ctx, accountID, search, after, selected, p)
	}
	slices.SortFunc(all, func(a, b store.PickerAgent) int { return pickerCompare(a.Name, b.Name) })
	shown := ""
	for _, a := range all {
		if selected[a.ID] || after != "" && pickerCompare(a.Name, after) <= 0 {
			continue
		}
		if len(p.Agents) == pageSize {
			// The "more" cursor: the last name shown, in this order.
			p.AgentNext = shown
			break
		}
		p.Agents = append(p.Agents, pickerOption(a))
		shown = a.Name
	}
	return nil
}

// pickerCompare orders agent names as people read them, then (for names
// that read alike, as "Agent 01" and "agent 1") by their bytes.
func pickerCompare(a, b string) int {
	return cmp.Or(naturalCompare(a, b), strings.Compare(a, b))
}

// storeAgents is untickedAgents beyond pickerCap: a page by the store's
// name key, sorted as people read it within the page only.
func (c *Console) storeAgents(ctx context.Context, accountID, search, after string, selected map[string]bool, p *newKeyPage) error {
	for {
		page, next, err := c.Store.AgentPickerPage(ctx, accountID, search, after, pageSize)
		if err != nil {
			return err
		}
		for _, a := range page {
			if !selected[a.ID] {
				p.Agents = append(p.Agents, pickerOption(a))
			}
		}
		p.AgentNext = next
		// A page made only of ticked agents would show nothing: go on.
		if len(p.Agents) > 0 || next == "" {
			slices.SortFunc(p.Agents, byLabel)
			return nil
		}
		after = next
	}
}

// pickerOption is an agent as the picker offers it.
func pickerOption(a store.PickerAgent) option {
	label := a.Name
	if !a.Enabled {
		label += " (disabled)"
	}
	return option{Value: a.ID, Label: label}
}

// showNewKeyForm is the create form: empty, or as posted (with what to
// fix, or with the agent picker searched).
func (c *Console) showNewKeyForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	f := readKeyForm(r)
	p, err := c.newKeyPage(r.Context(), s.user.AccountID, f)
	if err != nil {
		return err
	}
	// Under the account's key policy, only the expiries it allows.
	pol, err := c.Keys.Policy(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	p.Expiry, p.PolicyNote = policyExpiries(pol, f.expiry), policyWords(pol)
	return c.renderForm(w, r, s, e, "newkey", "Create an API key", &p)
}

// params turns the form into the service's parameters, or says what the
// user must fix, and where.
func (f keyForm) params(accountID string, now time.Time) (keys.CreateParams, error) {
	p := keys.CreateParams{AccountID: accountID, Name: f.name, Description: f.description, AgentIDs: f.agents}
	var err error
	if p.Scopes, err = f.chosenScopes(); err != nil {
		return p, err
	}
	env, ok := domain.ParseEnv(f.env)
	if !ok {
		return p, fieldError("env", "Choose live or test.")
	}
	p.Env = env
	if p.AllowedIPs, err = allowListField(f.allowedIPs); err != nil {
		return p, err
	}
	p.ExpiresAt, err = f.expiryTime(now)
	return p, err
}

// chosenScopes are the preset's scopes, or for "custom" the ticked ones
// (at least one, each from the list).
func (f keyForm) chosenScopes() ([]domain.Scope, error) {
	preset, ticked := f.scopeChoice()
	if preset != "custom" {
		pr, ok := domain.PresetByID(preset)
		if !ok {
			return nil, fieldError("preset", "Choose a preset or Custom.")
		}
		return pr.Scopes, nil
	}
	if len(ticked) == 0 {
		return nil, fieldError("scope", "Choose at least one scope for a custom key.")
	}
	scopes := make([]domain.Scope, 0, len(ticked))
	for _, s := range ticked {
		if !domain.ValidScope(s) {
			return nil, fieldError("scope", "Choose scopes from the list.")
		}
		scopes = append(scopes, domain.Scope(s))
	}
	return scopes, nil
}

// expiryTime is when the key expires by the form's choice: never (nil), a
// date and time in the future (UTC), or one of expiryChoices' days from now
// (or a key policy's maximum: policyExpiries offers it).
func (f keyForm) expiryTime(now time.Time) (*time.Time, error) {
	switch f.expiry {
	case "", "never":
		return nil, nil
	case "custom":
		t, err := time.ParseInLocation("2006-01-02T15:04", f.expiresAt, time.UTC)
		if err != nil {
			return nil, fieldError("expires_at", "Give the expiry as a date and time (UTC).")
		}
		if !t.After(now) {
			return nil, fieldError("expires_at", "Choose a date and time in the future.")
		}
		return &t, nil
	}
	days, err := strconv.Atoi(f.expiry)
	listed := slices.ContainsFunc(expiryChoices, func(o option) bool { return o.Value == f.expiry })
	if err != nil || !listed && (f.policyDays == 0 || days != f.policyDays) {
		return nil, fieldError("expiry", "Choose when the key expires.")
	}
	t := now.AddDate(0, 0, days)
	return &t, nil
}

// createdPage shows a credential once: the page a create or rotation
// redirects to (reveal.go), sent with Cache-Control: no-store.
type createdPage struct {
	Key        keyRow
	Credential string
	Old        *keyRow // set after a rotation
	// APIBase is where the curl line sends its request (apiBase).
	APIBase string
}

func (c *Console) handleCreateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	f := readKeyForm(r)
	switch f.op {
	case "", "create":
	case "search-agents", "more-agents":
		// The picker's buttons: the same form again, nothing created.
		return c.showNewKeyForm(w, r, s, nil)
	default:
		return errUnreadableForm
	}
	pol, err := c.Keys.Policy(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	f.policyDays = pol.MaxKeyLifetimeDays
	params, err := f.params(s.user.AccountID, c.Now())
	if err != nil {
		return err
	}
	created, err := c.Keys.Create(r.Context(), keys.Actor{User: &s.user}, params)
	if err != nil {
		return f.fieldOf(err)
	}
	c.Log.Info("console key created", "key_prefix", created.Key.Prefix, "user_id", s.user.ID)
	return c.reveal(w, r, s, created, nil)
}

type keyPage struct {
	Key     keyRow
	Lineage []keyRow // the key it replaced and the keys that replace it
	Events  []auditRow
	Pager   pager
	Usage   keyUsage // usage.go
	// Notices: the key's anomalies not dismissed yet (notices.go).
	Notices noticeBlock
}

func (c *Console) handleKey(w http.ResponseWriter, r *http.Request, s *session) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	chartRange, err := readPeriod(r) // usage.go
	if err != nil {
		return err
	}
	acct := s.user.AccountID
	k, err := c.Keys.Get(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		return err
	}
	lineage, err := c.Store.KeysRotatedFrom(r.Context(), acct, k.ID)
	if err != nil {
		return err
	}
	if k.RotatedFrom != "" {
		switch prev, err := c.Store.GetKey(r.Context(), acct, k.RotatedFrom); {
		case err == nil:
			lineage = append([]domain.APIKey{prev}, lineage...)
		case !errors.Is(err, domain.ErrNotFound):
			return err
		}
	}
	now := c.Now()
	rows, err := c.keyRows(r.Context(), acct, now, append(lineage, k)...)
	if err != nil {
		return err
	}
	p := keyPage{Key: rows[len(rows)-1], Lineage: rows[:len(rows)-1]}
	var next store.Cursor
	if p.Events, next, err = c.auditRows(r, store.AuditPageQuery{AccountID: acct, KeyID: k.ID, After: lp.After, Limit: pageSize}); err != nil {
		return err
	}
	p.Pager = pagerBoth("/console/developers/keys/"+url.PathEscape(k.ID), nil, lp, next, p.Events, auditRow.at)
	if p.Usage.Chart, err = buildChart(r.Context(), now, chartRange, c.Store.KeyUsage, c.Store.KeyLatency, k.ID, "/console/developers/keys/"+url.PathEscape(k.ID)); err != nil {
		return err
	}
	logs, _, err := c.Store.RequestLogPage(r.Context(), store.RequestLogQuery{AccountID: acct, KeyID: k.ID, Limit: recentLogs})
	if err != nil {
		return err
	}
	p.Usage.Recent = logRows(logs, nil)
	if p.Notices, err = c.keyNotices(r.Context(), acct, k.ID); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "key", isolate(k.Name), p)
}

// rotateChoices are when a rotated key's old key stops working.
var rotateChoices = []option{
	{Value: "manual", Label: "When I revoke it (keep both keys working)"},
	{Value: "now", Label: "Now"},
	{Value: "1h", Label: "In 1 hour"},
	{Value: "24h", Label: "In 24 hours"},
	{Value: "7d", Label: "In 7 days"},
}

// rotateIn is how long the old key of a rotation keeps working, by
// rotateChoices' value; "manual" is until it is revoked.
var rotateIn = map[string]time.Duration{"now": 0, "1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

type rotatePage struct {
	Key     keyRow
	Choices []option
	// PolicyNote: what the account's key policy does to the new key
	// (keyhealth.go), "" when nothing.
	PolicyNote string
	formError
}

// keyRow is the account's key id as a row.
func (c *Console) keyRow(ctx context.Context, accountID, id string) (keyRow, error) {
	k, err := c.Keys.Get(ctx, accountID, id)
	if err != nil {
		return keyRow{}, err
	}
	rows, err := c.keyRows(ctx, accountID, c.Now(), k)
	if err != nil {
		return keyRow{}, err
	}
	return rows[0], nil
}

func (c *Console) showRotateForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	k, err := c.keyRow(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	chosen := "manual"
	if r.Method == http.MethodPost {
		chosen = r.PostForm.Get("old_expires")
	}
	p := rotatePage{Key: k, Choices: choose(rotateChoices, chosen)}
	pol, err := c.Keys.Policy(r.Context(), s.user.AccountID)
	if err != nil {
		return err
	}
	p.PolicyNote = rotationPolicyWords(pol, k.APIKey)
	return c.renderForm(w, r, s, e, "rotate", "Rotate "+isolate(k.Name), &p)
}

func (c *Console) handleRotateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	// "": a form of an earlier release, without the question.
	choice := cmp.Or(r.PostForm.Get("old_expires"), "manual")
	var in *time.Duration
	if d, ok := rotateIn[choice]; ok {
		in = &d
	} else if choice != "manual" {
		return fieldError("old_expires", "Choose when the old key stops working.")
	}
	ctx, rep := fresh.WithReport(r.Context())
	created, err := c.Keys.Rotate(ctx, keys.Actor{User: &s.user}, s.user.AccountID, id, in)
	if err != nil {
		return err
	}
	c.Log.Info("console key rotated", "key_prefix", created.Key.Prefix, "old_key_id", id, "old_key_stops", choice, "user_id", s.user.ID)
	return c.reveal(w, r, s, created, rep)
}

type editKeyPage struct {
	Key keyRow
	newKeyPage
}

// allowListField reads the allowlist box (addresses and prefixes separated
// by commas, spaces or lines); a bad entry is the box's error.
func allowListField(s string) (domain.AllowList, error) {
	l, err := domain.ParseAllowList(s)
	if de := (*domain.Error)(nil); errors.As(err, &de) {
		msg := capitalize(de.Message)
		if !strings.HasSuffix(msg, "?") {
			msg += "."
		}
		return nil, fieldError("allowed_ips", msg)
	}
	return l, err
}

// showEditForm is the edit form: the key's settings, or the form as
// posted with what to fix (e set) or with the agent picker searched.
func (c *Console) showEditForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	k, err := c.keyRow(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	f := editForm(k.APIKey)
	if r.Method == http.MethodPost {
		f = readKeyForm(r)
	}
	np, err := c.newKeyPage(r.Context(), s.user.AccountID, f)
	if err != nil {
		return err
	}
	// The expiry choices: unchanged, or an earlier one (never is only
	// "unchanged", for a key that never expires).
	keep := option{Value: "keep", Label: "Unchanged (never)"}
	if k.ExpiresAt != nil {
		keep.Label = "Unchanged (" + k.ExpiresAt.UTC().Format("2006-01-02 15:04") + " UTC)"
	}
	np.Expiry = choose(append([]option{keep}, editExpiries(k.ExpiresAt, c.Now())...), cmp.Or(f.expiry, "keep"))
	if k.ExpiresAt != nil {
		np.ExpiryNote = "An expiry can only be brought earlier: the choices end before " + k.ExpiresAt.UTC().Format("2006-01-02 15:04") + " UTC."
	}
	np.RateLimit = k.RateLimitPerMinute
	p := editKeyPage{Key: k, newKeyPage: np}
	return c.renderForm(w, r, s, e, "editkey", "Edit "+isolate(k.Name), &p)
}

// editExpiries are the expiries the edit form offers a key expiring at
// expires (nil: never): only those the edit accepts, no later than it
// (keys.Edit), and a date, which the edit checks.
func editExpiries(expires *time.Time, now time.Time) []option {
	var out []option
	for _, o := range expiryChoices[1:] {
		days, err := strconv.Atoi(o.Value)
		if err == nil && expires != nil && now.AddDate(0, 0, days).After(*expires) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// editForm is k's settings as the edit form starts with them: its preset
// when its scopes are one's, else Custom with them ticked.
func editForm(k domain.APIKey) keyForm {
	f := keyForm{name: k.Name, description: k.Description, preset: "custom", expiry: "keep",
		allowedIPs: strings.Join(k.AllowedIPs.Strings(), "\n"), agents: k.AgentIDs}
	if pr, ok := presetOf(k.Scopes); ok {
		f.preset = pr.ID
		return f
	}
	for _, sc := range k.Scopes {
		f.scopes = append(f.scopes, string(sc))
	}
	return f
}

// presetOf is the preset granting exactly scopes.
func presetOf(scopes []domain.Scope) (domain.Preset, bool) {
	i := slices.IndexFunc(domain.Presets, func(p domain.Preset) bool { return slices.Equal(p.Scopes, scopes) })
	if i < 0 {
		return domain.Preset{}, false
	}
	return domain.Presets[i], true
}

// handleEditKey saves the edit form, in one transaction: the access and
// allowed addresses (unless the key is revoked), the name and description,
// each checked before anything is saved. The picker's buttons only show
// the form again.
func (c *Console) handleEditKey(w http.ResponseWriter, r *http.Request, s *session) error {
	f := readKeyForm(r)
	switch f.op {
	case "", "save":
	case "search-agents", "more-agents":
		return c.showEditForm(w, r, s, nil)
	default:
		return errUnreadableForm
	}
	if err := keys.CheckText(f.name, f.description); err != nil {
		return err
	}
	actor := keys.Actor{User: &s.user}
	k, err := c.Keys.Get(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	edit := keys.Edit{Name: f.name, Description: f.description}
	if k.RevokedAt == nil {
		if edit.Access, edit.AllowedIPs, err = c.editAccess(k, f); err != nil {
			return err
		}
	}
	ctx, rep := fresh.WithReport(r.Context())
	if _, err := c.Keys.Edit(ctx, actor, s.user.AccountID, k.ID, edit); err != nil {
		return f.fieldOf(err)
	}
	c.Log.Info("console key edited", "key_id", k.ID, "user_id", s.user.ID)
	return seeOther(mirrorTarget(rep, "/console/developers/keys/"+url.PathEscape(k.ID)+"?done=edited"))
}

// editAccess reads the form's scopes, agents and expiry (a form of an
// earlier release, without a preset, changes none of them: nil) and
// allowed addresses.
func (c *Console) editAccess(k domain.APIKey, f keyForm) (*keys.Access, *domain.AllowList, error) {
	allowed, err := allowListField(f.allowedIPs)
	if err != nil {
		return nil, nil, err
	}
	if f.preset == "" {
		return nil, &allowed, nil
	}
	a := keys.Access{AgentIDs: f.agents, ExpiresAt: k.ExpiresAt}
	if a.Scopes, err = f.chosenScopes(); err != nil {
		return nil, nil, err
	}
	if f.expiry != "keep" && f.expiry != "" {
		if a.ExpiresAt, err = f.expiryTime(c.Now()); err != nil {
			return nil, nil, err
		}
	}
	return &a, &allowed, nil
}

// fieldOf puts the service's refusal of a key form on its field: an AI
// agent of the restriction that is not there (not a missing page), an
// expiry chosen from the list rather than typed.
func (f keyForm) fieldOf(err error) error {
	de := (*domain.Error)(nil)
	switch {
	case !errors.As(err, &de):
		return err
	case de.Code == domain.CodeNotFound && strings.Contains(de.Message, "AI agent"):
		return fieldError("agent", capitalize(strings.TrimSuffix(de.Message, "."))+".")
	case len(de.Fields) > 0 && de.Fields[0].Field == "expires_at" && f.expiry != "custom":
		return fieldError("expiry", capitalize(strings.TrimSuffix(de.Message, "."))+".")
	}
	return err
}

func (c *Console) handleRevokeForm(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := c.keyRow(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "revoke", "Revoke "+isolate(k.Name), keyPage{Key: k})
}

func (c *Console) handleRevokeKey(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	ctx, rep := fresh.WithReport(r.Context())
	if err := c.Keys.Revoke(ctx, keys.Actor{User: &s.user}, s.user.AccountID, id); err != nil {
		return err
	}
	c.Log.Info("console key revoked", "key_id", id, "user_id", s.user.ID)
	return seeOther(mirrorTarget(rep, "/console/developers/keys/"+id+"?done=revoked"))
}

// auditRow is an event as a list shows it. An event that names another
// key in its detail ("replaces key_…", "replaced by key_…") shows that
// key by name, linked: DetailBefore, the key, DetailAfter.
type auditRow struct {
	store.AuditItem
	Action                    string // as people read it (actionLabel)
	DetailBefore, DetailAfter string
	RelatedID, RelatedName    string
	// EndpointID is the webhook endpoint a webhook event is about (its
	// detail starts with it; DetailAfter is the rest), EndpointURL its
	// address while it exists ("" once deleted).
	EndpointID, EndpointURL string
}

func (r auditRow) at() (time.Time, string) { return r.CreatedAt, r.ID }

// actionLabel is an event's action as people read it ("rate limit
// changed"); a user's role and password events drop "user".
func actionLabel(a domain.AuditAction) string {
	switch a {
	case domain.AuditAllowedIPsChanged:
		return "allowed addresses changed"
	case domain.AuditUserRoleChanged, domain.AuditUserPasswordReset:
		a = a[len("user_"):]
	case domain.AuditWebhookSecretRotated:
		return "webhook secret rotated"
	}
	if rest, ok := strings.CutPrefix(string(a), "webhook_endpoint_"); ok {
		return "webhook " + rest
	}
	return strings.ReplaceAll(string(a), "_", " ")
}

var keyIDInDetail = regexp.MustCompile(`\b` + domain.PrefixKey + `_[0-9a-z]{26}\b`)

// auditRows reads a page of the trail and names the keys it refers to.
func (c *Console) auditRows(r *http.Request, q store.AuditPageQuery) ([]auditRow, store.Cursor, error) {
	items, next, err := c.Store.AuditPage(r.Context(), q)
	if err != nil {
		return nil, next, err
	}
	labels, err := keyLabels(r.Context(), c.Store, q.AccountID, items, func(it store.AuditItem) string { return keyIDInDetail.FindString(it.Detail) })
	if err != nil {
		return nil, next, err
	}
	rows := make([]auditRow, 0, len(items))
	for _, it := range items {
		row := auditRow{AuditItem: it, Action: actionLabel(it.Action)}
		if loc := keyIDInDetail.FindStringIndex(it.Detail); loc != nil {
			id := it.Detail[loc[0]:loc[1]]
			if l, ok := labels[id]; ok {
				row.DetailBefore, row.DetailAfter = it.Detail[:loc[0]], it.Detail[loc[1]:]
				row.RelatedID, row.RelatedName = id, l.Name
			}
		}
		rows = append(rows, row)
	}
	return rows, next, c.endpointsOf(r, q.AccountID, rows)
}

var endpointInDetail = regexp.MustCompile(`^we_[0-9a-z]{26}\b`)

// endpointsOf names the webhook endpoint each webhook event of rows is
// about, by its address (one query: an account has at most
// domain.MaxWebhookEndpoints).
func (c *Console) endpointsOf(r *http.Request, accountID string, rows []auditRow) error {
	var urls map[string]string
	for i := range rows {
		row := &rows[i]
		id := endpointInDetail.FindString(row.Detail)
		if id == "" || !slices.Contains(domain.WebhookAuditActions, row.AuditItem.Action) {
			continue
		}
		if urls == nil {
			list, err := c.Store.ListWebhookEndpoints(r.Context(), accountID)
			if err != nil {
				return err
			}
			urls = map[string]string{}
			for _, e := range list {
				urls[e.ID] = e.URL
			}
		}
		row.EndpointID, row.EndpointURL = id, urls[id]
		row.DetailAfter = webhookDetail(row.Detail[len(id):], urls[id])
	}
	return nil
}

// webhookDetail is a webhook event's detail after its endpoint's id, as
// the trail shows it beside the endpoint: the address it still has left
// out, a rotation's overlap in words.
func webhookDetail(rest, url string) string {
	rest = strings.TrimLeft(rest, " ;:")
	if url != "" && strings.HasPrefix(rest, url) {
		rest = strings.TrimLeft(rest[len(url):], " ;:")
	}
	const overlap = "the old secret stays valid for "
	if d, err := time.ParseDuration(strings.TrimPrefix(rest, overlap)); err == nil && strings.HasPrefix(rest, overlap) {
		return overlapWords(d)
	}
	return rest
}

// overlapWords says how long a rotated secret's old one stays valid.
func overlapWords(d time.Duration) string {
	switch {
	case d <= 0:
		return "the old secret stopped at once"
	case d%(24*time.Hour) == 0:
		return "the old secret stays valid for " + plural(int(d/(24*time.Hour)), "day")
	case d%time.Hour == 0:
		return "the old secret stays valid for " + plural(int(d/time.Hour), "hour")
	}
	return "the old secret stays valid for " + d.String()
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

type auditPage struct {
	Events []auditRow
	Pager  pager
}

func (c *Console) handleAudit(w http.ResponseWriter, r *http.Request, s *session) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	events, next, err := c.auditRows(r, store.AuditPageQuery{AccountID: s.user.AccountID, Search: lp.Search, After: lp.After, Limit: pageSize})
	if err != nil {
		return err
	}
	p := auditPage{Events: events, Pager: pagerBoth("/console/developers/audit", url.Values{"q": {lp.Search}}, lp, next, events, auditRow.at)}
	return c.render(w, r, s, http.StatusOK, "audit", "Audit trail", p)
}
