// Package webhooks owns webhook endpoints and the delivery of events to
// them (docs/webhooks.md): managing endpoints (validation, secrets,
// rotation, test events, resends) and the worker that delivers, signs and
// retries. Events themselves are written by the store, in the transaction
// of the change they record.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/client/webhook"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Limits of an endpoint's fields.
const (
	maxURLLength         = 2048
	maxDescriptionLength = 500
	// MaxOldSecretOverlap bounds rotate-secret's old_secret_expires_in.
	MaxOldSecretOverlap = 7 * 24 * time.Hour
	// DefaultOldSecretOverlap is rotate-secret's default overlap.
	DefaultOldSecretOverlap = 24 * time.Hour
)

// Service manages an account's endpoints.
type Service struct {
	store *store.Store
	now   func() time.Time
	// allow are the ranges deliveries may reach although internal, and
	// where http:// is accepted (serve --webhook-allow).
	allow []netip.Prefix
}

// New returns a Service; allow is serve's --webhook-allow.
func New(st *store.Store, now func() time.Time, allow []netip.Prefix) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, now: now, allow: allow}
}

// Actor is who manages endpoints: the account, and for the audit trail
// the console user (UserID, Label) or the API key (KeyID) acting.
type Actor struct {
	AccountID string
	UserID    string
	Label     string
	KeyID     string
}

func (a Actor) audit(action domain.AuditAction, detail string, now time.Time) domain.AuditEvent {
	label := a.Label
	if label == "" {
		label = "API key " + a.KeyID
	}
	return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, now), AccountID: a.AccountID,
		Action: action, ActorID: a.UserID, Actor: label, Detail: detail, CreatedAt: now}
}

// Params are an endpoint's settable fields; nil leaves one as it is on
// update (and takes its default on create).
type Params struct {
	URL           *string
	Description   *string
	EnabledEvents *[]string
	Disabled      *bool
}

// Created is a new or rotated endpoint with its secret, shown once.
type Created struct {
	Endpoint domain.WebhookEndpoint
	Secret   string
}

func fieldErr(field string, code domain.Code, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &domain.Error{Code: code, Message: msg, Fields: []domain.FieldError{{Field: field, Code: code, Message: msg}}}
}

// checkURL refuses what deliveries could never reach: not an absolute
// https:// URL (http:// only to a literal address in an allowed range),
// credentials in it, a fragment, or over maxURLLength.
func (s *Service) checkURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fieldErr("url", domain.CodeMissingField, "url is required: the https:// address deliveries are posted to.")
	}
	if len(raw) > maxURLLength || !utf8.ValidString(raw) {
		return "", fieldErr("url", domain.CodeInvalidValue, "url must be at most %d bytes of text.", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fieldErr("url", domain.CodeInvalidValue, "url must be an absolute https:// URL.")
	}
	if u.User != nil || u.Fragment != "" || strings.ContainsAny(raw, " \t\r\n") {
		return "", fieldErr("url", domain.CodeInvalidValue, "url must not carry credentials, a fragment or spaces.")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !s.allowedHost(u.Hostname()) {
			return "", fieldErr("url", domain.CodeInvalidValue, "url must use https://.")
		}
	default:
		return "", fieldErr("url", domain.CodeInvalidValue, "url must be an absolute https:// URL.")
	}
	return u.String(), nil
}

// allowedHost reports whether host is an address (or localhost) inside an
// allowed range: http:// is accepted only there.
func (s *Service) allowedHost(host string) bool {
	if host == "localhost" {
		host = "127.0.0.1"
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	return slices.ContainsFunc(s.allow, func(p netip.Prefix) bool { return p.Contains(addr) })
}

// checkEvents refuses an empty list, an unknown type or family, and "*"
// beside anything else; duplicates are dropped.
func checkEvents(list []string) ([]string, error) {
	if len(list) == 0 {
		return nil, fieldErr("enabled_events", domain.CodeMissingField,
			"enabled_events must name at least one event type, a family such as api_key.*, or \"*\".")
	}
	var out []string
	for _, t := range list {
		if !domain.ValidEventPattern(t, true) {
			return nil, fieldErr("enabled_events", domain.CodeInvalidValue,
				"enabled_events: %q is not an event type; use one of %s, a family (%s) or \"*\".",
				t, joinTypes(), strings.Join(domain.EventFamilies, ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > 1 && slices.Contains(out, "*") {
		return nil, fieldErr("enabled_events", domain.CodeInvalidValue, "enabled_events: \"*\" stands alone.")
	}
	return out, nil
}

func joinTypes() string {
	s := make([]string, len(domain.EventTypes))
	for i, t := range domain.EventTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func checkDescription(d string) (string, error) {
	if !utf8.ValidString(d) || utf8.RuneCountInString(d) > maxDescriptionLength || strings.ContainsRune(d, 0) {
		return "", fieldErr("description", domain.CodeInvalidValue, "description must be at most %d characters of text.", maxDescriptionLength)
	}
	return strings.TrimSpace(d), nil
}

// Create makes an endpoint, enabled, with a new secret. Every field at
// fault is named at once.
func (s *Service) Create(ctx context.Context, actor Actor, p Params) (Created, error) {
	var errs []error
	if p.URL == nil {
		errs = append(errs, fieldErr("url", domain.CodeMissingField, "url is required: the https:// address deliveries are posted to."))
	}
	if p.EnabledEvents == nil {
		errs = append(errs, fieldErr("enabled_events", domain.CodeMissingField,
			"enabled_events is required: event types, families such as api_key.*, or [\"*\"]."))
	}
	p, err := s.checkParams(p)
	if err != nil {
		errs = append(errs, err)
	}
	if err := joinFieldErrors(errs); err != nil {
		return Created{}, err
	}
	u, events, desc := *p.URL, *p.EnabledEvents, ""
	if p.Description != nil {
		desc = *p.Description
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return Created{}, fmt.Errorf("new secret: %w", err)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	e := domain.WebhookEndpoint{ID: domain.NewID("we", now), AccountID: actor.AccountID, URL: u, Description: desc,
		EnabledEvents: events, Status: domain.WebhookEnabled, Secret: secret, CreatedAt: now, UpdatedAt: now}
	if p.Disabled != nil && *p.Disabled {
		e.Status, e.DisabledReason = domain.WebhookDisabled, domain.DisabledManual
	}
	err = s.store.CreateWebhookEndpoint(ctx, e, actor.audit(domain.AuditWebhookCreated, e.ID+" "+e.URL, now))
	if errors.Is(err, store.ErrEndpointLimit) {
		return Created{}, domain.Errorf(domain.CodeInconsistentState,
			"This account has %d webhook endpoints, the most it may have: delete one before adding another.", domain.MaxWebhookEndpoints)
	}
	if err != nil {
		return Created{}, fmt.Errorf("create endpoint: %w", err)
	}
	return Created{Endpoint: e, Secret: secret}, nil
}

// NotFound is the error for an endpoint id not in the account.
func NotFound(id string) error {
	return domain.Errorf(domain.CodeNotFound, "No webhook endpoint %q in this account.", id)
}

// Get reads one endpoint.
func (s *Service) Get(ctx context.Context, actor Actor, id string) (domain.WebhookEndpoint, error) {
	e, err := s.store.GetWebhookEndpoint(ctx, actor.AccountID, id)
	if errors.Is(err, domain.ErrNotFound) {
		return e, NotFound(id)
	}
	return e, err
}

// List returns the account's endpoints, oldest first.
func (s *Service) List(ctx context.Context, actor Actor) ([]domain.WebhookEndpoint, error) {
	return s.store.ListWebhookEndpoints(ctx, actor.AccountID)
}

// Update changes what p sets; enabling a disabled endpoint clears its
// reason and failing clock. A change to nothing writes nothing.
func (s *Service) Update(ctx context.Context, actor Actor, id string, p Params) (domain.WebhookEndpoint, error) {
	next, err := s.checkParams(p)
	if err != nil {
		return domain.WebhookEndpoint{}, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	e, err := s.store.UpdateWebhookEndpoint(ctx, actor.AccountID, id, func(e *domain.WebhookEndpoint) (bool, error) {
		return applyParams(e, next, now), nil
	}, func(before, after domain.WebhookEndpoint) domain.AuditEvent {
		return actor.audit(domain.AuditWebhookUpdated, after.ID+" "+describeChange(before, after), now)
	})
	if errors.Is(err, domain.ErrNotFound) {
		return e, NotFound(id)
	}
	return e, err
}

// checkParams validates the fields p sets, naming every one at fault.
func (s *Service) checkParams(p Params) (Params, error) {
	var errs []error
	if p.URL != nil {
		u, err := s.checkURL(*p.URL)
		errs = append(errs, err)
		p.URL = &u
	}
	if p.EnabledEvents != nil {
		ev, err := checkEvents(*p.EnabledEvents)
		errs = append(errs, err)
		p.EnabledEvents = &ev
	}
	if p.Description != nil {
		d, err := checkDescription(*p.Description)
		errs = append(errs, err)
		p.Description = &d
	}
	return p, joinFieldErrors(errs)
}

// joinFieldErrors is one error naming the fields of every domain.Error in
// errs (nil ones skipped), the first one's code and message leading; any
// other error is returned as it is.
func joinFieldErrors(errs []error) error {
	var out *domain.Error
	for _, err := range errs {
		var de *domain.Error
		switch {
		case err == nil:
		case !errors.As(err, &de):
			return err
		case out == nil:
			cp := *de
			out = &cp
		default:
			out.Fields = append(out.Fields, de.Fields...)
		}
	}
	if out == nil {
		return nil
	}
	return out
}

// applyParams sets p's fields on e and reports whether any changed.
func applyParams(e *domain.WebhookEndpoint, p Params, now time.Time) bool {
	before := *e
	if p.URL != nil {
		e.URL = *p.URL
	}
	if p.Description != nil {
		e.Description = *p.Description
	}
	if p.EnabledEvents != nil {
		e.EnabledEvents = *p.EnabledEvents
	}
	if p.Disabled != nil {
		switch {
		case *p.Disabled && e.Status == domain.WebhookEnabled:
			e.Status, e.DisabledReason = domain.WebhookDisabled, domain.DisabledManual
		case !*p.Disabled && e.Status == domain.WebhookDisabled:
			e.Status, e.DisabledReason, e.FailingSince = domain.WebhookEnabled, "", nil
		}
	}
	changed := e.URL != before.URL || e.Description != before.Description ||
		!slices.Equal(e.EnabledEvents, before.EnabledEvents) || e.Status != before.Status
	if changed {
		e.UpdatedAt = now
	}
	return changed
}

// describeChange is the audit trail's account of an update.
func describeChange(before, after domain.WebhookEndpoint) string {
	var parts []string
	if before.URL != after.URL {
		parts = append(parts, "url "+before.URL+" → "+after.URL)
	}
	if before.Description != after.Description {
		parts = append(parts, "description changed")
	}
	if !slices.Equal(before.EnabledEvents, after.EnabledEvents) {
		parts = append(parts, "events "+strings.Join(after.EnabledEvents, ", "))
	}
	if before.Status != after.Status {
		parts = append(parts, after.Status)
	}
	return strings.Join(parts, "; ")
}

// Delete removes an endpoint with its deliveries.
func (s *Service) Delete(ctx context.Context, actor Actor, id string) error {
	now := s.now().UTC().Truncate(time.Millisecond)
	err := s.store.DeleteWebhookEndpoint(ctx, actor.AccountID, id, actor.audit(domain.AuditWebhookDeleted, id, now))
	if errors.Is(err, domain.ErrNotFound) {
		return NotFound(id)
	}
	return err
}

// RotateSecret gives the endpoint a new secret; the old one stays valid
// (every delivery carries both signatures) for overlap, 0 to
// MaxOldSecretOverlap.
func (s *Service) RotateSecret(ctx context.Context, actor Actor, id string, overlap time.Duration) (Created, error) {
	if overlap < 0 || overlap > MaxOldSecretOverlap {
		return Created{}, fieldErr("old_secret_expires_in", domain.CodeInvalidValue,
			"old_secret_expires_in must be a whole number of seconds from 0 to %d.", int(MaxOldSecretOverlap.Seconds()))
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return Created{}, fmt.Errorf("new secret: %w", err)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	e, err := s.store.UpdateWebhookEndpoint(ctx, actor.AccountID, id, func(e *domain.WebhookEndpoint) (bool, error) {
		e.OldSecret, e.OldSecretExpiresAt = "", nil
		if overlap > 0 {
			exp := now.Add(overlap)
			e.OldSecret, e.OldSecretExpiresAt = e.Secret, &exp
		}
		e.Secret, e.UpdatedAt = secret, now
		return true, nil
	}, func(_, after domain.WebhookEndpoint) domain.AuditEvent {
		return actor.audit(domain.AuditWebhookSecretRotated,
			fmt.Sprintf("%s; the old secret stays valid for %s", after.ID, overlap), now)
	})
	if errors.Is(err, domain.ErrNotFound) {
		return Created{}, NotFound(id)
	}
	if err != nil {
		return Created{}, err
	}
	return Created{Endpoint: e, Secret: secret}, nil
}

// SendTest delivers a webhook.test event to the endpoint alone.
func (s *Service) SendTest(ctx context.Context, actor Actor, id string) (domain.Event, error) {
	e, err := s.Get(ctx, actor, id)
	if err != nil {
		return domain.Event{}, err
	}
	if e.Status != domain.WebhookEnabled {
		return domain.Event{}, domain.Errorf(domain.CodeImmutableState, "The webhook endpoint %q is disabled: enable it first.", id)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	ev := domain.Event{ID: domain.NewID("evt", now), AccountID: actor.AccountID, Type: domain.EventWebhookTest,
		CreatedAt: now, Endpoint: id, RequestID: domain.RequestIDFrom(ctx),
		Data: []byte(`{"message":"This is a test event from agentapi."}`)}
	return s.store.SendTestEvent(ctx, ev)
}

// Resend makes the event's delivery to the endpoint due now, with a fresh
// round of attempts.
func (s *Service) Resend(ctx context.Context, actor Actor, endpointID, eventID string) error {
	err := s.store.ResendDelivery(ctx, actor.AccountID, endpointID, eventID, s.now().UTC())
	if errors.Is(err, domain.ErrNotFound) {
		if _, gerr := s.Get(ctx, actor, endpointID); gerr != nil {
			return gerr
		}
		return domain.Errorf(domain.CodeNotFound, "No event %q in this account.", eventID)
	}
	return err
}

// Attempts lists an endpoint's delivery attempts, newest first.
func (s *Service) Attempts(ctx context.Context, actor Actor, q store.AttemptQuery) ([]domain.WebhookAttempt, error) {
	if _, err := s.Get(ctx, actor, q.EndpointID); err != nil {
		return nil, err
	}
	q.AccountID = actor.AccountID
	return s.store.ListAttempts(ctx, q)
}
