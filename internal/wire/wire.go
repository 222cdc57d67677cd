// Package wire declares the /v1 objects as they travel: each JSON field in
// the contract's order, timestamps as the server writes them (RFC 3339, UTC,
// milliseconds, Z). The API renders them through encoding/json (internal/api)
// and the CLI's api commands print them, so each shape is declared once.
// Go programs read the same objects through the public client package,
// whose types carry time.Time; a test in internal/api decodes every API
// response into the client's types with unknown fields refused.
package wire

import (
	"encoding/json"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// TimeFormat is how every timestamp leaves the service: RFC 3339, UTC,
// millisecond precision (what the store keeps), ending in Z.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time formats t as TimeFormat says.
func Time(t time.Time) string { return t.UTC().Format(TimeFormat) }

// TimePtr formats *t; nil stays nil (JSON null).
func TimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Time(*t)
	return &s
}

// AgentItem is an agent in a list: exactly the contract's four fields.
type AgentItem struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Enabled   bool   `json:"enabled"`
	CreatedAt string `json:"created_at"`
}

// Agent is an agent in a single-agent response, with every field (empty
// instructions included).
type Agent struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Enabled      bool   `json:"enabled"`
	CreatedAt    string `json:"created_at"`
	Instructions string `json:"instructions"`
	UpdatedAt    string `json:"updated_at"`
}

// Key is the API key object's fields that every surface shows: what the
// CLI's `api me` prints, and the start of GET /me's object (Me) and of the
// operator's `key list` lines.
type Key struct {
	ID                 string         `json:"id"`
	Name               string         `json:"name"`
	Description        string         `json:"description"`
	Prefix             string         `json:"prefix"`
	Scopes             []domain.Scope `json:"scopes"`
	RateLimitPerMinute int            `json:"rate_limit_per_minute"`
	LastUsedAt         *string        `json:"last_used_at"`
	ExpiresAt          *string        `json:"expires_at"` // nil: the key does not expire
}

// Me is GET /me's key object: Key and the key's IP allowlist, [] when any
// address may use it.
type Me struct {
	Key
	AllowedIPs []string `json:"allowed_ips"`
}

// Stats is an agent's question statistics.
type Stats struct {
	AgentID            string  `json:"agent_id"`
	QuestionsTotal     int64   `json:"questions_total"`
	AnsweredTotal      int64   `json:"answered_total"`
	FailedTotal        int64   `json:"failed_total"`
	LastQuestionAt     *string `json:"last_question_at"`  // nil: never asked
	AverageAnswerMS    *int64  `json:"average_answer_ms"` // nil: nothing answered
	ConversationsTotal int64   `json:"conversations_total"`
}

// Answer is an answered question.
type Answer struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Question       string `json:"question"`
	Answer         string `json:"answer"`
	CreatedAt      string `json:"created_at"`
	AnswerMS       int64  `json:"answer_ms"`
}

// Meta is a collection page's meta object.
type Meta struct {
	Limit   int     `json:"limit"`
	Next    *string `json:"next"` // nil on the last page
	HasMore bool    `json:"has_more"`
}

// KeyOf is k's fields that every surface shows.
func KeyOf(k domain.APIKey) Key {
	return Key{ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix, Scopes: k.Scopes,
		RateLimitPerMinute: k.RateLimitPerMinute, LastUsedAt: TimePtr(k.LastUsedAt), ExpiresAt: TimePtr(k.ExpiresAt)}
}

// MeOf is k as GET /me shows it (an event's data for a key).
func MeOf(k domain.APIKey) Me {
	return Me{Key: KeyOf(k), AllowedIPs: k.AllowedIPs.Strings()}
}

// AgentOf is a as a single-agent response shows it (an event's data for an
// agent).
func AgentOf(a domain.Agent) Agent {
	return Agent{ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: Time(a.CreatedAt),
		Instructions: a.Instructions, UpdatedAt: Time(a.UpdatedAt)}
}

// Event is an event as GET /v1/events and webhook deliveries show it
// (docs/webhooks.md, The event object). What a type adds beside data
// (previous_attributes, source, reason, details) is left out elsewhere.
type Event struct {
	ID                 string             `json:"id"`
	Type               domain.EventType   `json:"type"`
	CreatedAt          string             `json:"created_at"`
	Data               json.RawMessage    `json:"data"`
	PreviousAttributes json.RawMessage    `json:"previous_attributes,omitempty"`
	Source             json.RawMessage    `json:"source,omitempty"`
	Reason             json.RawMessage    `json:"reason,omitempty"`
	Details            json.RawMessage    `json:"details,omitempty"`
	RequestID          *string            `json:"request_id"`
	Actor              *domain.EventActor `json:"actor"`
}

// EventOf is ev as the API shows it.
func EventOf(ev domain.Event) Event {
	out := Event{ID: ev.ID, Type: ev.Type, CreatedAt: Time(ev.CreatedAt), Data: ev.Data,
		PreviousAttributes: ev.Previous, Actor: ev.Actor}
	if ev.RequestID != "" {
		out.RequestID = &ev.RequestID
	}
	var extra struct{ Source, Reason, Details json.RawMessage }
	if len(ev.Extra) > 0 && json.Unmarshal(ev.Extra, &extra) == nil {
		out.Source, out.Reason, out.Details = extra.Source, extra.Reason, extra.Details
	}
	return out
}

// WebhookEndpoint is a webhook endpoint as the API shows it; Secret only in
// the answer that created or rotated it.
type WebhookEndpoint struct {
	ID                 string   `json:"id"`
	URL                string   `json:"url"`
	Description        string   `json:"description"`
	EnabledEvents      []string `json:"enabled_events"`
	Status             string   `json:"status"`
	DisabledReason     *string  `json:"disabled_reason"`
	CreatedAt          string   `json:"created_at"`
	UpdatedAt          string   `json:"updated_at"`
	Secret             string   `json:"secret,omitempty"`
	OldSecretExpiresAt *string  `json:"old_secret_expires_at,omitempty"`
}

// WebhookEndpointOf is e as the API shows it, without its secrets.
func WebhookEndpointOf(e domain.WebhookEndpoint) WebhookEndpoint {
	out := WebhookEndpoint{ID: e.ID, URL: e.URL, Description: e.Description, EnabledEvents: e.EnabledEvents,
		Status: e.Status, CreatedAt: Time(e.CreatedAt), UpdatedAt: Time(e.UpdatedAt)}
	if out.EnabledEvents == nil {
		out.EnabledEvents = []string{}
	}
	if e.DisabledReason != "" {
		out.DisabledReason = &e.DisabledReason
	}
	return out
}

// WebhookAttempt is one delivery attempt in an endpoint's log.
type WebhookAttempt struct {
	ID             string           `json:"id"`
	EventID        string           `json:"event_id"`
	EventType      domain.EventType `json:"event_type"`
	Attempt        int              `json:"attempt"`
	Status         string           `json:"status"`
	ResponseStatus *int             `json:"response_status"`
	Error          *string          `json:"error"`
	LatencyMS      int64            `json:"latency_ms"`
	ResponseBody   string           `json:"response_body"`
	CreatedAt      string           `json:"created_at"`
	DeliveryStatus string           `json:"delivery_status"`
	NextAttemptAt  *string          `json:"next_attempt_at"`
}

// WebhookAttemptOf is a as the API shows it.
func WebhookAttemptOf(a domain.WebhookAttempt) WebhookAttempt {
	out := WebhookAttempt{ID: a.ID, EventID: a.EventID, EventType: a.EventType, Attempt: a.Attempt, Status: a.Status,
		LatencyMS: a.LatencyMS, ResponseBody: a.ResponseBody, CreatedAt: Time(a.CreatedAt),
		DeliveryStatus: a.DeliveryStatus, NextAttemptAt: TimePtr(a.NextAttemptAt)}
	if a.ResponseStatus != 0 {
		out.ResponseStatus = &a.ResponseStatus
	}
	if a.Error != "" {
		out.Error = &a.Error
	}
	return out
}

// KeyPolicy is an account's key policy as a key_policy.updated event's
// data shows it (docs/webhooks.md, Event types): the maximum lifetime of
// new keys in days (null: none) and whether they must name allowed
// addresses.
type KeyPolicy struct {
	MaxKeyLifetimeDays *int    `json:"max_key_lifetime_days"`
	RequireAllowedIPs  bool    `json:"require_allowed_ips"`
	UpdatedAt          *string `json:"updated_at"`
}

// KeyPolicyOf is p as an event shows it.
func KeyPolicyOf(p domain.KeyPolicy) KeyPolicy {
	out := KeyPolicy{RequireAllowedIPs: p.RequireAllowedIPs}
	if p.MaxKeyLifetimeDays > 0 {
		d := p.MaxKeyLifetimeDays
		out.MaxKeyLifetimeDays = &d
	}
	if !p.UpdatedAt.IsZero() {
		out.UpdatedAt = TimePtr(&p.UpdatedAt)
	}
	return out
}
