package domain

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// EventType names what happened (docs/webhooks.md, Event types).
type EventType string

// The event types of this release, in the order docs/webhooks.md lists them.
const (
	EventAgentCreated            EventType = "ai_agent.created"
	EventAgentUpdated            EventType = "ai_agent.updated"
	EventAgentEnabled            EventType = "ai_agent.enabled"
	EventAgentDisabled           EventType = "ai_agent.disabled"
	EventKeyCreated              EventType = "api_key.created"
	EventKeyUpdated              EventType = "api_key.updated"
	EventKeyRevoked              EventType = "api_key.revoked"
	EventKeyExpiring             EventType = "api_key.expiring"
	EventKeyExpired              EventType = "api_key.expired"
	EventKeyLeaked               EventType = "api_key.leaked"
	EventKeyAnomaly              EventType = "api_key.anomaly"
	EventWebhookEndpointDisabled EventType = "webhook_endpoint.disabled"
	// EventKeyPolicyUpdated: the account's key policy changed (data: the
	// policy; previous_attributes: the changed fields' old values).
	EventKeyPolicyUpdated EventType = "key_policy.updated"
	// EventWebhookTest is what "send test event" delivers to one endpoint;
	// it is never listed by GET /v1/events and no endpoint subscribes to it.
	EventWebhookTest EventType = "webhook.test"
)

// EventTypes lists every type an endpoint can subscribe to and GET
// /v1/events can filter on.
var EventTypes = []EventType{
	EventAgentCreated, EventAgentUpdated, EventAgentEnabled, EventAgentDisabled,
	EventKeyCreated, EventKeyUpdated, EventKeyRevoked, EventKeyExpiring, EventKeyExpired,
	EventKeyLeaked, EventKeyAnomaly, EventWebhookEndpointDisabled, EventKeyPolicyUpdated,
}

// EventFamilies are the `<resource>.*` patterns that match every type of a
// resource.
var EventFamilies = []string{"ai_agent.*", "api_key.*", "webhook_endpoint.*", "key_policy.*"}

// ValidEventPattern reports whether p names a type or a family (and, where
// all is true, the wildcard "*").
func ValidEventPattern(p string, all bool) bool {
	return slices.Contains(EventTypes, EventType(p)) || slices.Contains(EventFamilies, p) || (all && p == "*")
}

// EventMatches reports whether t is selected by any of patterns (types,
// families or "*").
func EventMatches(patterns []string, t EventType) bool {
	for _, p := range patterns {
		if p == "*" || EventType(p) == t {
			return true
		}
		if fam, ok := strings.CutSuffix(p, ".*"); ok && strings.HasPrefix(string(t), fam+".") {
			return true
		}
	}
	return false
}

// EventActor is who caused a key event made outside /v1: a console user or
// CLI operator (Type "user", a user id), or the service itself (Type
// "system", ID naming the part: "support", "secret_scanning", "sweep").
type EventActor struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Event is one thing that happened in an account, as stored: Data is the
// resource's JSON as the API shows it after the change, Previous the changed
// fields' old values (api_key.updated), Extra what a type adds beside them
// (source, reason and details), each a JSON object or nil.
type Event struct {
	ID        string
	AccountID string
	Type      EventType
	CreatedAt time.Time
	RequestID string // "" when not caused by a /v1 request
	Actor     *EventActor
	AgentID   string // the agent an ai_agent event is about; "" otherwise
	Data      json.RawMessage
	Previous  json.RawMessage
	Extra     json.RawMessage
	Seq       int64 // the account's commit order (GET /v1/events' cursor)
	// Endpoint is the endpoint a webhook.test event goes to, or the one a
	// webhook_endpoint.disabled event is about (which is not told of it).
	Endpoint string
}

type requestIDKey struct{}

// WithRequestID marks ctx as the handling of the /v1 request id, so that
// the events a write under it records name that request.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom is the id WithRequestID set, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WebhookEndpoint is where an account's events are delivered
// (docs/webhooks.md, Endpoints). Secret is the current signing secret;
// OldSecret, until OldSecretExpiresAt, the one a rotation replaced.
type WebhookEndpoint struct {
	ID                 string
	AccountID          string
	URL                string
	Description        string
	EnabledEvents      []string
	Status             string // WebhookEnabled or WebhookDisabled
	DisabledReason     string // "", "manual", "gone" or "failing"
	Secret             string
	OldSecret          string
	OldSecretExpiresAt *time.Time
	FailingSince       *time.Time
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Endpoint statuses and why one is disabled.
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"

	DisabledManual  = "manual"
	DisabledGone    = "gone"
	DisabledFailing = "failing"
)

// MaxWebhookEndpoints is how many endpoints an account may have.
const MaxWebhookEndpoints = 16

// Secrets are the signing secrets valid at now: the current one and, during
// a rotation's overlap, the old one.
func (e WebhookEndpoint) Secrets(now time.Time) []string {
	out := []string{e.Secret}
	if e.OldSecret != "" && e.OldSecretExpiresAt != nil && now.Before(*e.OldSecretExpiresAt) {
		out = append(out, e.OldSecret)
	}
	return out
}

// Delivery statuses: waiting for an attempt, answered 2xx, or given up
// after the last attempt (or on a disabled endpoint).
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// WebhookAttempt is one try at delivering an event to an endpoint: what the
// deliveries log shows.
type WebhookAttempt struct {
	ID             string
	EndpointID     string
	EventID        string
	EventType      EventType
	Attempt        int
	Status         string // "succeeded" or "failed"
	ResponseStatus int    // 0 when no answer came
	Error          string // "", "timeout", "connection_refused", "address_not_allowed", "tls", "dns", "connection_error", "http_status", "redirect"
	LatencyMS      int64
	ResponseBody   string // the answer's first 1 KiB
	CreatedAt      time.Time
	DeliveryStatus string // the delivery's status now
	NextAttemptAt  *time.Time
}
