package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Event is one thing that happened in an account (GET /events, and the
// body of every webhook delivery). Data is the resource after the change:
// for ai_agent.* an agent as GetAgent shows it, for api_key.* a key as Me
// shows it, for webhook_endpoint.disabled the endpoint; decode it with
// AgentData, KeyData or EndpointData. The other raw fields are set only by
// the types that carry them: PreviousAttributes (api_key.updated),
// Source (api_key.leaked), Reason and Details (api_key.anomaly).
type Event struct {
	ID                 string          `json:"id"`
	Type               string          `json:"type"`
	CreatedAt          time.Time       `json:"created_at"`
	Data               json.RawMessage `json:"data"`
	PreviousAttributes json.RawMessage `json:"previous_attributes,omitempty"`
	Source             *EventSource    `json:"source,omitempty"`
	Reason             string          `json:"reason,omitempty"`
	Details            json.RawMessage `json:"details,omitempty"`
	// RequestID is the id of the /v1 request that caused the event; nil
	// for time-based events and changes made in the console, by the CLI or
	// by secret scanning.
	RequestID *string `json:"request_id"`
	// Actor is who caused a key event outside /v1; nil otherwise.
	Actor *EventActor `json:"actor"`
}

// EventSource is where a leaked key was found (api_key.leaked).
type EventSource struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// EventActor is who caused an event outside /v1: a console user or CLI
// operator (Type "user", ID a user id) or the service itself (Type
// "system").
type EventActor struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// AgentData decodes an ai_agent.* event's data.
func (e Event) AgentData() (Agent, error) { return eventData[Agent](e, "ai_agent.") }

// KeyData decodes an api_key.* event's data.
func (e Event) KeyData() (Key, error) { return eventData[Key](e, "api_key.") }

// EndpointData decodes a webhook_endpoint.* event's data.
func (e Event) EndpointData() (WebhookEndpoint, error) {
	return eventData[WebhookEndpoint](e, "webhook_endpoint.")
}

func eventData[T any](e Event, family string) (T, error) {
	var v T
	if !strings.HasPrefix(e.Type, family) {
		return v, fmt.Errorf("client: event %s is %s, not %s*", e.ID, e.Type, family)
	}
	if err := json.Unmarshal(e.Data, &v); err != nil {
		return v, fmt.Errorf("client: decode %s data: %w", e.Type, err)
	}
	return v, nil
}

// EventListParams selects events for ListEvents and Events.
type EventListParams struct {
	// Types keeps events of these types or families ("api_key.*"); none
	// keeps every type.
	Types []string
	// CreatedSince, when not zero, keeps events created at or after it.
	CreatedSince time.Time
	// Limit is the page size; 0 leaves it to the server (30).
	Limit int
	// Next is meta.next of the previous page of the same query (ListEvents
	// only; Events follows it itself).
	Next string
}

func (p EventListParams) query() url.Values {
	q := url.Values{}
	if len(p.Types) > 0 {
		q.Set("type", strings.Join(p.Types, ","))
	}
	if !p.CreatedSince.IsZero() {
		q.Set("created_since", p.CreatedSince.UTC().Format(time.RFC3339Nano))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Next != "" {
		q.Set("next", p.Next)
	}
	return q
}

// ListPage is one page of a collection other than agents.
type ListPage[T any] struct {
	Items   []T
	Limit   int    // meta.limit: the page size the server applied
	Next    string // meta.next; empty when HasMore is false
	HasMore bool   // meta.has_more
	// RateLimit is what this response's X-RateLimit-* headers said.
	RateLimit RateLimit
}

// listCall fetches one page of a collection.
func listCall[T any](ctx context.Context, c *Client, cl call) (ListPage[T], error) {
	r, err := c.do(ctx, cl)
	if err != nil {
		return ListPage[T]{}, err
	}
	var env struct {
		Data *[]T `json:"data"`
		Meta *struct {
			Limit   int    `json:"limit"`
			Next    string `json:"next"` // null leaves it empty
			HasMore bool   `json:"has_more"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Data == nil || env.Meta == nil {
		return ListPage[T]{}, fmt.Errorf("client: %s %s: response is not a collection envelope", cl.method, cl.path)
	}
	p := ListPage[T]{Items: *env.Data, Limit: env.Meta.Limit, Next: env.Meta.Next, HasMore: env.Meta.HasMore, RateLimit: r.rateLimit}
	if p.HasMore && p.Next == "" {
		return ListPage[T]{}, fmt.Errorf("client: %s %s: has_more is true but next is null", cl.method, cl.path)
	}
	return p, nil
}

// ListEvents fetches one page of events, oldest first in commit order
// (GET /events; webhooks:manage). A key restricted to agents sees only its
// agents' events. Most callers want Events, which follows the pages.
func (c *Client) ListEvents(ctx context.Context, p EventListParams) (ListPage[Event], error) {
	return listCall[Event](ctx, c, call{method: http.MethodGet, path: "/events", query: p.query()})
}

// Events iterates over every event the parameters select, following
// meta.next while meta.has_more is true. Saving the last page's Next (from
// ListEvents) and starting from it later sees every event exactly once. An
// error ends the iteration after being yielded once.
func (c *Client) Events(ctx context.Context, p EventListParams) iter.Seq2[Event, error] {
	return pages(func(next string) (ListPage[Event], error) {
		q := p
		if next != "" {
			q.Next = next
		}
		return c.ListEvents(ctx, q)
	}, p.Next, "GET /events")
}

// pages iterates over the items of the pages fetch returns, starting at
// cursor first.
func pages[T any](fetch func(next string) (ListPage[T], error), first, what string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		cur := first
		seen := map[string]bool{}
		for {
			p, err := fetch(cur)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range p.Items {
				if !yield(it, nil) {
					return
				}
			}
			if !p.HasMore {
				return
			}
			if p.Next == cur || seen[p.Next] {
				// A cursor that does not move, or comes round again, would
				// loop until ctx ends.
				yield(zero, errors.New("client: "+what+": the server sent back a cursor it had already given"))
				return
			}
			seen[p.Next] = true
			cur = p.Next
		}
	}
}

// idPath is prefix/{id}[suffix], the id escaped so that it stays one path
// segment.
func idPath(prefix, what, id, suffix string) (string, error) {
	if id == "" {
		return "", errors.New("client: " + what + " id is empty")
	}
	return prefix + "/" + url.PathEscape(id) + suffix, nil
}

// GetEvent reads one event (GET /events/{id}; webhooks:manage).
func (c *Client) GetEvent(ctx context.Context, id string) (Event, error) {
	return idCall[Event](ctx, c, call{method: http.MethodGet}, "/events", "event", id, "")
}

// WebhookEndpoint is where an account's events are delivered. Secret is
// set only by CreateWebhookEndpoint and RotateWebhookSecret: the signing
// secret (whsec_…), shown that once; OldSecretExpiresAt, after a rotation,
// is when the replaced secret stops signing deliveries.
type WebhookEndpoint struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Description   string   `json:"description"`
	EnabledEvents []string `json:"enabled_events"`
	Status        string   `json:"status"` // "enabled" or "disabled"
	// DisabledReason is "manual", "gone" (the endpoint answered 410) or
	// "failing"; nil while enabled.
	DisabledReason     *string    `json:"disabled_reason"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
	Secret             string     `json:"secret,omitempty"`
	OldSecretExpiresAt *time.Time `json:"old_secret_expires_at,omitempty"`
}

// ListWebhookEndpoints fetches one page of the account's webhook endpoints,
// oldest first (GET /webhook-endpoints; webhooks:manage). An account has at
// most 16, so one page of Limit 0 (30) holds them all.
func (c *Client) ListWebhookEndpoints(ctx context.Context, limit int, next string) (ListPage[WebhookEndpoint], error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if next != "" {
		q.Set("next", next)
	}
	return listCall[WebhookEndpoint](ctx, c, call{method: http.MethodGet, path: "/webhook-endpoints", query: q})
}

// NewWebhookEndpoint is the body of CreateWebhookEndpoint.
type NewWebhookEndpoint struct {
	URL string `json:"url"`
	// EnabledEvents are event types, families ("api_key.*") or ["*"].
	EnabledEvents []string `json:"enabled_events"`
	Description   string   `json:"description,omitempty"`
}

// CreateWebhookEndpoint adds an endpoint (POST /webhook-endpoints;
// webhooks:manage; a key not restricted to agents). The answer's Secret is
// the only time the signing secret is shown. An account with 16 endpoints
// gets 409 inconsistent_state. Retried with one Idempotency-Key.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, e NewWebhookEndpoint) (WebhookEndpoint, error) {
	return dataCall[WebhookEndpoint](ctx, c, call{method: http.MethodPost, path: "/webhook-endpoints", body: e, idempotent: true})
}

// endpointCall is dataCall on one endpoint, at /webhook-endpoints/{id}[suffix].
func endpointCall[T any](ctx context.Context, c *Client, cl call, id, suffix string) (T, error) {
	return idCall[T](ctx, c, cl, "/webhook-endpoints", "webhook endpoint", id, suffix)
}

// GetWebhookEndpoint reads one endpoint, without its secret (GET
// /webhook-endpoints/{id}; webhooks:manage).
func (c *Client) GetWebhookEndpoint(ctx context.Context, id string) (WebhookEndpoint, error) {
	return endpointCall[WebhookEndpoint](ctx, c, call{method: http.MethodGet}, id, "")
}

// WebhookEndpointUpdate is the body of UpdateWebhookEndpoint; nil fields
// are left unchanged. Status is "enabled" or "disabled".
type WebhookEndpointUpdate struct {
	URL           *string   `json:"url,omitempty"`
	Description   *string   `json:"description,omitempty"`
	EnabledEvents *[]string `json:"enabled_events,omitempty"`
	Status        *string   `json:"status,omitempty"`
}

// UpdateWebhookEndpoint changes an endpoint (PATCH /webhook-endpoints/{id};
// webhooks:manage).
func (c *Client) UpdateWebhookEndpoint(ctx context.Context, id string, u WebhookEndpointUpdate) (WebhookEndpoint, error) {
	return endpointCall[WebhookEndpoint](ctx, c, call{method: http.MethodPatch, body: u}, id, "")
}

// DeleteWebhookEndpoint deletes an endpoint and its pending deliveries
// (DELETE /webhook-endpoints/{id}; webhooks:manage).
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	path, err := idPath("/webhook-endpoints", "webhook endpoint", id, "")
	if err != nil {
		return err
	}
	_, err = c.do(ctx, call{method: http.MethodDelete, path: path})
	return err
}

// RotateWebhookSecret gives an endpoint a new signing secret, returned in
// Secret (POST /webhook-endpoints/{id}/rotate-secret; webhooks:manage). The
// old secret keeps signing deliveries, beside the new one, for overlap
// (whole seconds, at most 7 days; a negative overlap leaves it to the
// server: 24 hours). Not retried after a transport error or 5xx: a second
// rotation would replace the secret this one made.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string, overlap time.Duration) (WebhookEndpoint, error) {
	body := map[string]int64{}
	if overlap >= 0 {
		body["old_secret_expires_in"] = int64(overlap / time.Second)
	}
	return endpointCall[WebhookEndpoint](ctx, c, call{method: http.MethodPost, body: body, once: true}, id, "/rotate-secret")
}

// SendTestEvent delivers a webhook.test event to this endpoint alone and
// returns it (POST /webhook-endpoints/{id}/test; webhooks:manage). A
// disabled endpoint is 409 immutable_state.
func (c *Client) SendTestEvent(ctx context.Context, id string) (Event, error) {
	return endpointCall[Event](ctx, c, call{method: http.MethodPost, once: true}, id, "/test")
}

// WebhookAttempt is one try at delivering an event to an endpoint.
type WebhookAttempt struct {
	ID        string `json:"id"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	Attempt   int    `json:"attempt"`
	Status    string `json:"status"` // "succeeded" or "failed"
	// ResponseStatus is the endpoint's HTTP status; nil when none came.
	ResponseStatus *int `json:"response_status"`
	// Error classes a failure ("timeout", "connection_refused",
	// "address_not_allowed", "tls", …); nil when an answer came.
	Error        *string   `json:"error"`
	LatencyMS    int64     `json:"latency_ms"`
	ResponseBody string    `json:"response_body"` // the answer's first 1 KiB
	CreatedAt    time.Time `json:"created_at"`
	// DeliveryStatus is the delivery's status now: "pending", "delivered"
	// or "failed".
	DeliveryStatus string     `json:"delivery_status"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
}

// DeliveryListParams selects attempts for ListDeliveries.
type DeliveryListParams struct {
	Status  string // "succeeded" or "failed"; empty for both
	EventID string // one event's attempts; empty for every event
	Limit   int    // 0 leaves it to the server (30)
	Next    string // meta.next of the previous page of the same query
}

// ListDeliveries fetches one page of an endpoint's delivery attempts, newest
// first (GET /webhook-endpoints/{id}/deliveries; webhooks:manage).
func (c *Client) ListDeliveries(ctx context.Context, endpointID string, p DeliveryListParams) (ListPage[WebhookAttempt], error) {
	path, err := idPath("/webhook-endpoints", "webhook endpoint", endpointID, "/deliveries")
	if err != nil {
		return ListPage[WebhookAttempt]{}, err
	}
	q := url.Values{}
	for k, v := range map[string]string{"status": p.Status, "event_id": p.EventID, "next": p.Next} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return listCall[WebhookAttempt](ctx, c, call{method: http.MethodGet, path: path, query: q})
}

// ResendDelivery makes an event's delivery to the endpoint due now, with a
// fresh round of attempts (POST
// /webhook-endpoints/{id}/deliveries/{event_id}/resend; webhooks:manage).
func (c *Client) ResendDelivery(ctx context.Context, endpointID, eventID string) error {
	path, err := idPath("/webhook-endpoints", "webhook endpoint", endpointID, "/deliveries")
	if err == nil {
		path, err = idPath(path, "event", eventID, "/resend")
	}
	if err != nil {
		return err
	}
	_, err = c.do(ctx, call{method: http.MethodPost, path: path, once: true})
	return err
}
