package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/webhooks"
)

// Settings → Developers → Webhooks (docs/console.md, Webhooks): an
// account's webhook endpoints, for Owners and Admins. Every change goes
// through webhooks.Service, which checks it and writes the audit trail; a
// signing secret is shown once, as a key's credential is (reveal.go).

const webhooksPath = "/console/developers/webhooks"

func endpointPath(id string) string { return webhooksPath + "/" + url.PathEscape(id) }

// secretPath is the page that shows an endpoint's new secret once.
func secretPath(id string) string { return endpointPath(id) + "/secret" }

// webhookRoutes adds the webhook pages, each behind manager.
func (c *Console) webhookRoutes(mux *http.ServeMux, manager func(handler) http.Handler) {
	mux.Handle("GET "+webhooksPath, manager(c.handleEndpoints))
	mux.Handle("GET "+webhooksPath+"/new", manager(blank(c.showEndpointForm)))
	mux.Handle("POST "+webhooksPath, manager(form(c.handleCreateEndpoint, c.showEndpointForm)))
	mux.Handle("GET "+webhooksPath+"/{id}", manager(blank(c.showEndpoint)))
	mux.Handle("GET "+webhooksPath+"/{id}/secret", manager(c.handleSecret))
	mux.Handle("GET "+webhooksPath+"/{id}/edit", manager(blank(c.showEndpointForm)))
	mux.Handle("POST "+webhooksPath+"/{id}/edit", manager(form(c.handleEditEndpoint, c.showEndpointForm)))
	mux.Handle("POST "+webhooksPath+"/{id}/enabled", manager(form(c.handleEndpointEnabled, c.showEndpoint)))
	mux.Handle("POST "+webhooksPath+"/{id}/test", manager(form(c.handleTestEvent, c.showEndpoint)))
	mux.Handle("POST "+webhooksPath+"/{id}/deliveries", manager(c.handleDeliveryFilter))
	mux.Handle("POST "+webhooksPath+"/{id}/deliveries/{event}/resend", manager(form(c.handleResend, c.showEndpoint)))
	mux.Handle("GET "+webhooksPath+"/{id}/rotate", manager(blank(c.showRotateSecret)))
	mux.Handle("POST "+webhooksPath+"/{id}/rotate", manager(form(c.handleRotateSecret, c.showRotateSecret)))
	mux.Handle("GET "+webhooksPath+"/{id}/delete", manager(c.handleDeleteForm))
	mux.Handle("POST "+webhooksPath+"/{id}/delete", manager(c.handleDeleteEndpoint))
}

// webhookActor is the signed-in user as the webhooks service audits them.
func webhookActor(s *session) webhooks.Actor {
	return webhooks.Actor{AccountID: s.user.AccountID, UserID: s.user.ID, Label: s.user.Email}
}

// endpointRow is an endpoint as the console shows it: never its secrets.
type endpointRow struct {
	ID, URL, Description string
	EnabledEvents        []string
	Enabled              bool
	// Reason is why a disabled endpoint is, as people read it.
	Reason               string
	DisabledReason       string
	OldSecretExpiresAt   *time.Time
	FailingSince         *time.Time
	CreatedAt, UpdatedAt time.Time
}

// disabledReasons say why an endpoint is disabled.
var disabledReasons = map[string]string{
	domain.DisabledManual:  "disabled by a user",
	domain.DisabledGone:    "the endpoint answered 410 Gone",
	domain.DisabledFailing: "no successful delivery for 5 days",
}

func endpointRowOf(e domain.WebhookEndpoint, now time.Time) endpointRow {
	r := endpointRow{ID: e.ID, URL: e.URL, Description: e.Description, EnabledEvents: e.EnabledEvents,
		Enabled: e.Status == domain.WebhookEnabled, DisabledReason: e.DisabledReason, FailingSince: e.FailingSince,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if !r.Enabled {
		r.Reason = disabledReasons[e.DisabledReason]
	}
	if e.OldSecret != "" && e.OldSecretExpiresAt != nil && now.Before(*e.OldSecretExpiresAt) {
		r.OldSecretExpiresAt = e.OldSecretExpiresAt
	}
	return r
}

type endpointsPage struct {
	Endpoints []endpointRow
	// Full: the account has domain.MaxWebhookEndpoints endpoints.
	Full bool
	Max  int
}

func (c *Console) handleEndpoints(w http.ResponseWriter, r *http.Request, s *session) error {
	list, err := c.Webhooks.List(r.Context(), webhookActor(s))
	if err != nil {
		return err
	}
	now := c.Now()
	p := endpointsPage{Full: len(list) >= domain.MaxWebhookEndpoints, Max: domain.MaxWebhookEndpoints}
	for _, e := range list {
		p.Endpoints = append(p.Endpoints, endpointRowOf(e, now))
	}
	return c.render(w, r, s, http.StatusOK, "webhooks", "Webhooks", p)
}

// eventGroup is one resource's event types on the endpoint form: its
// family's box, then a box per type.
type eventGroup struct {
	Family option
	Types  []option
}

// endpointFormPage is the create and edit form. Endpoint is set on edit.
type endpointFormPage struct {
	Endpoint         *endpointRow
	URL, Description string
	All              option
	Groups           []eventGroup
	formError
}

// endpointForm is what the endpoint form posted.
type endpointForm struct {
	url, description string
	events           []string
}

func readEndpointForm(r *http.Request) endpointForm {
	f := r.PostForm
	return endpointForm{url: f.Get("url"), description: f.Get("description"), events: f["enabled_events"]}
}

// chosenEvents are the form's boxes as the service takes them: "*" alone
// when it is ticked, and a family without the types it covers, so that
// ticking a family and some of its types asks for the family.
func (f endpointForm) chosenEvents() []string {
	if slices.Contains(f.events, "*") {
		return []string{"*"}
	}
	var out []string
	for _, e := range f.events {
		fam, _, _ := strings.Cut(e, ".")
		if e != fam+".*" && slices.Contains(f.events, fam+".*") || slices.Contains(out, e) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// eventGroups are the form's event boxes, those in ticked ticked.
func eventGroups(ticked []string) []eventGroup {
	var groups []eventGroup
	for _, fam := range domain.EventFamilies {
		g := eventGroup{Family: option{Value: fam, Label: "Every " + fam + " event", Checked: slices.Contains(ticked, fam)}}
		for _, t := range domain.EventTypes {
			if domain.EventMatches([]string{fam}, t) {
				g.Types = append(g.Types, option{Value: string(t), Label: string(t), Checked: slices.Contains(ticked, string(t))})
			}
		}
		groups = append(groups, g)
	}
	return groups
}

// showEndpointForm is the create form (no id in the path) or an
// endpoint's edit form: as a GET shows it, or as posted with what to fix.
func (c *Console) showEndpointForm(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	f := endpointForm{events: []string{"*"}}
	p := endpointFormPage{}
	title := "Add a webhook endpoint"
	if id := r.PathValue("id"); id != "" {
		ep, err := c.Webhooks.Get(r.Context(), webhookActor(s), id)
		if err != nil {
			return err
		}
		row := endpointRowOf(ep, c.Now())
		p.Endpoint, title = &row, "Edit webhook endpoint"
		f = endpointForm{url: ep.URL, description: ep.Description, events: ep.EnabledEvents}
	}
	if r.Method == http.MethodPost {
		f = readEndpointForm(r)
	}
	p.URL, p.Description = f.url, f.description
	p.All = option{Value: "*", Label: "Every event, including types added later", Checked: slices.Contains(f.events, "*")}
	p.Groups = eventGroups(f.events)
	return c.renderForm(w, r, s, e, "webhookform", title, &p)
}

func (f endpointForm) params() webhooks.Params {
	events := f.chosenEvents()
	return webhooks.Params{URL: &f.url, Description: &f.description, EnabledEvents: &events}
}

func (c *Console) handleCreateEndpoint(w http.ResponseWriter, r *http.Request, s *session) error {
	created, err := c.Webhooks.Create(r.Context(), webhookActor(s), readEndpointForm(r).params())
	if err != nil {
		return formWords(err)
	}
	id := created.Endpoint.ID
	c.Log.Info("console webhook endpoint created", "endpoint_id", id, "user_id", s.user.ID)
	if err := c.sealReveal(w, r, s, id, secretPath(id), created.Secret); err != nil {
		return sealFailed(id, err)
	}
	return seeOther(secretPath(id))
}

// formWords puts the service's refusal of a field in the form's words:
// the API's messages name its JSON fields ("url must use https://.").
func formWords(err error) error {
	var de *domain.Error
	if !errors.As(err, &de) || len(de.Fields) == 0 || de.Code != domain.CodeMissingField && de.Code != domain.CodeInvalidValue {
		return err
	}
	field, msg := de.Fields[0].Field, de.Message
	switch {
	case field == "enabled_events" && de.Code == domain.CodeMissingField:
		msg = "Choose the events to send: every event, a resource's events, or single types."
	case field == "enabled_events":
		msg = "Events" + strings.TrimPrefix(msg, "enabled_events")
	case field == "url":
		msg = "The URL" + strings.TrimPrefix(msg, "url")
	case field == "description":
		msg = "The description" + strings.TrimPrefix(msg, "description")
	}
	return fieldError(field, msg)
}

// sealFailed is a new secret that cannot be shown: the endpoint exists,
// and rotating its secret shows another.
func sealFailed(id string, err error) error {
	return fmt.Errorf("seal the secret of webhook endpoint %s (made, not shown): %w", id, err)
}

func (c *Console) handleEditEndpoint(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if _, err := c.Webhooks.Update(r.Context(), webhookActor(s), id, readEndpointForm(r).params()); err != nil {
		return formWords(err)
	}
	c.Log.Info("console webhook endpoint edited", "endpoint_id", id, "user_id", s.user.ID)
	return seeOther(endpointPath(id) + "?done=webhook-edited")
}

// handleEndpointEnabled enables (enabled=true) or disables (false) an
// endpoint.
func (c *Console) handleEndpointEnabled(w http.ResponseWriter, r *http.Request, s *session) error {
	id, v := r.PathValue("id"), r.PostForm.Get("enabled")
	done, ok := map[string]string{"true": "webhook-enabled", "false": "webhook-disabled"}[v]
	if !ok {
		return &pageError{Status: http.StatusBadRequest, Message: "Choose whether the endpoint is enabled."}
	}
	disabled := v == "false"
	if _, err := c.Webhooks.Update(r.Context(), webhookActor(s), id, webhooks.Params{Disabled: &disabled}); err != nil {
		return err
	}
	c.Log.Info("console webhook endpoint enabled set", "endpoint_id", id, "enabled", !disabled, "user_id", s.user.ID)
	return seeOther(endpointPath(id) + "?done=" + done)
}

func (c *Console) handleTestEvent(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	ev, err := c.Webhooks.SendTest(r.Context(), webhookActor(s), id)
	if err != nil {
		return err
	}
	c.Log.Info("console webhook test event", "endpoint_id", id, "event_id", ev.ID, "user_id", s.user.ID)
	return seeOther(endpointPath(id) + "?done=webhook-test")
}

func (c *Console) handleResend(w http.ResponseWriter, r *http.Request, s *session) error {
	id, event := r.PathValue("id"), r.PathValue("event")
	if err := c.Webhooks.Resend(r.Context(), webhookActor(s), id, event); err != nil {
		return err
	}
	c.Log.Info("console webhook delivery resent", "endpoint_id", id, "event_id", event, "user_id", s.user.ID)
	return seeOther(endpointPath(id) + "?done=webhook-resent")
}

// overlapChoices are how long a rotated secret's old one stays valid.
var overlapChoices = []option{
	{Value: "now", Label: "Not at all: only the new secret, from now"},
	{Value: "1h", Label: "For 1 hour"},
	{Value: "24h", Label: "For 24 hours"},
	{Value: "7d", Label: "For 7 days"},
}

var overlapOf = map[string]time.Duration{"now": 0, "1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

type rotateSecretPage struct {
	Endpoint endpointRow
	Choices  []option
	formError
}

func (c *Console) endpointRow(r *http.Request, s *session) (endpointRow, error) {
	e, err := c.Webhooks.Get(r.Context(), webhookActor(s), r.PathValue("id"))
	if err != nil {
		return endpointRow{}, err
	}
	return endpointRowOf(e, c.Now()), nil
}

func (c *Console) showRotateSecret(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	ep, err := c.endpointRow(r, s)
	if err != nil {
		return err
	}
	chosen := "24h"
	if r.Method == http.MethodPost {
		chosen = r.PostForm.Get("overlap")
	}
	p := rotateSecretPage{Endpoint: ep, Choices: choose(overlapChoices, chosen)}
	return c.renderForm(w, r, s, e, "webhookrotate", "Rotate the signing secret", &p)
}

func (c *Console) handleRotateSecret(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	overlap, ok := overlapOf[r.PostForm.Get("overlap")]
	if !ok {
		return fieldError("overlap", "Choose how long the old secret stays valid.")
	}
	rotated, err := c.Webhooks.RotateSecret(r.Context(), webhookActor(s), id, overlap)
	if err != nil {
		return err
	}
	c.Log.Info("console webhook secret rotated", "endpoint_id", id, "overlap", overlap.String(), "user_id", s.user.ID)
	if err := c.sealReveal(w, r, s, id, secretPath(id), rotated.Secret); err != nil {
		return sealFailed(id, err)
	}
	return seeOther(secretPath(id) + "?rotated=1")
}

// secretPage shows an endpoint's new signing secret once.
type secretPage struct {
	Endpoint endpointRow
	Secret   string
	Rotated  bool
}

// handleSecret shows an endpoint's new secret once, as handleCreated shows
// a key's credential: without one to show it is the endpoint's page.
func (c *Console) handleSecret(w http.ResponseWriter, r *http.Request, s *session) error {
	ep, err := c.endpointRow(r, s)
	if err != nil {
		return err
	}
	secret, once, err := c.revealed(r, s, ep.ID)
	if err != nil {
		return err
	}
	setRevealCookie(w, r, secretPath(ep.ID), "", -time.Second)
	if secret == "" {
		return seeOther(endpointPath(ep.ID))
	}
	first, err := c.Store.Claim(r.Context(), once)
	if err != nil {
		return err
	}
	if !first {
		return seeOther(endpointPath(ep.ID))
	}
	p := secretPage{Endpoint: ep, Secret: secret, Rotated: r.URL.Query().Get("rotated") == "1"}
	title := "Endpoint added"
	if p.Rotated {
		title = "Secret rotated"
	}
	return c.render(w, r, s, http.StatusOK, "webhooksecret", title, p)
}

func (c *Console) handleDeleteForm(w http.ResponseWriter, r *http.Request, s *session) error {
	ep, err := c.endpointRow(r, s)
	if err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "webhookdelete", "Delete webhook endpoint", ep)
}

func (c *Console) handleDeleteEndpoint(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if err := c.Webhooks.Delete(r.Context(), webhookActor(s), id); err != nil {
		return err
	}
	c.Log.Info("console webhook endpoint deleted", "endpoint_id", id, "user_id", s.user.ID)
	return seeOther(webhooksPath + "?done=webhook-deleted")
}
