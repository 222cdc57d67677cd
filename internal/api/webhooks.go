package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/webhooks"
	"github.com/agentapi/agentapi/internal/wire"
)

// Events and webhook endpoints (docs/webhooks.md): every route needs
// webhooks:manage; endpoint management also refuses a key restricted to
// agents, which sees only its agents' events.

// evented marks the request's context with its id, so that the events its
// writes record name it (request_id).
func evented(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		rec := r.Context().Value(ctxLogAttrs).(*recorder)
		return next(w, r.WithContext(domain.WithRequestID(r.Context(), rec.id)))
	}
}

// endpointManager refuses a key restricted to agents: endpoints receive
// every agent's events.
func endpointManager(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if len(authFrom(r.Context()).key.AgentIDs) > 0 {
			return domain.Errorf(domain.CodeAccessDenied,
				"This API key is restricted to certain AI agents; webhook endpoints receive every agent's events, so only an unrestricted key manages them.")
		}
		return next(w, r)
	}
}

func webhookActor(r *http.Request) webhooks.Actor {
	k := authFrom(r.Context()).key
	return webhooks.Actor{AccountID: k.AccountID, KeyID: k.ID, Label: "API key " + k.Prefix}
}

// eventsQuery reads GET /v1/events' query: its filter (as cursors are
// bound to it) and where the page starts.
func eventsQuery(r *http.Request, cursors *cursorSigner, account string) (store.EventQuery, string, error) {
	var p problems
	q := p.query(r, "limit", "next", "type", "created_since", "after")
	rawLimit, given := q["limit"]
	eq := store.EventQuery{AccountID: account, Limit: parseLimit(rawLimit, given)}
	var filter []string
	if v, ok := q["type"]; ok {
		eq.Types = eventTypes(&p, v)
		filter = append(filter, "type="+strings.Join(eq.Types, ","))
	}
	if v, ok := q["created_since"]; ok {
		if t, ok := parseTimestamp(v); ok {
			t = ceilMilli(t)
			eq.Since = &t
			filter = append(filter, "created_since="+strconv.FormatInt(t.UnixMilli(), 10))
		} else {
			p.add("created_since", domain.CodeInvalidValue,
				"created_since must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z.")
		}
	}
	f := strings.Join(filter, "&")
	if v, ok := q["after"]; ok {
		eq.AfterID = v // resolved by the store: the events committed after it
		if _, ok := q["next"]; ok {
			p.add("after", domain.CodeInvalidValue, "after and next cannot be given together; next already says where the page starts.")
		}
	}
	if v, ok := q["next"]; ok {
		c, ok := decodeCursor(cursors, account, "events?"+f, v)
		seq, err := strconv.ParseInt(c.id, 10, 64)
		if !ok || err != nil {
			p.add("next", domain.CodeInvalidValue,
				"next is not a cursor of this query; copy meta.next from the previous page of the same query.")
		}
		eq.AfterSeq = seq
	}
	return eq, "events?" + f, p.err()
}

// eventTypes splits a type filter: event types and families, comma
// separated.
func eventTypes(p *problems, v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if !domain.ValidEventPattern(t, false) {
			p.add("type", domain.CodeInvalidValue,
				"type: %q is not an event type; give one or more types or families (such as api_key.*), comma separated.", echo(t))
			return nil
		}
		out = append(out, t)
	}
	return out
}

func handleListEvents(st *store.Store, cursors *cursorSigner) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		k := authFrom(r.Context()).key
		q, filter, err := eventsQuery(r, cursors, k.AccountID)
		if err != nil {
			return err
		}
		if len(k.AgentIDs) > 0 {
			q.AgentIDs = k.AgentIDs
		}
		evs, err := st.ListEvents(r.Context(), q)
		if errors.Is(err, domain.ErrNotFound) {
			return &domain.Error{Code: domain.CodeInvalidValue, Message: "after must be the id of an event of this account.",
				Fields: []domain.FieldError{{Field: "after", Code: domain.CodeInvalidValue, Message: "after must be the id of an event of this account."}}}
		}
		if err != nil {
			return err
		}
		m := meta{Limit: q.Limit, HasMore: len(evs) > q.Limit}
		if m.HasMore {
			evs = evs[:q.Limit]
			last := evs[len(evs)-1]
			next := encodeCursor(cursors, k.AccountID, filter, cursor{createdAt: last.CreatedAt, id: strconv.FormatInt(last.Seq, 10)})
			m.Next = &next
		}
		out := make([]wire.Event, len(evs))
		for i, ev := range evs {
			out[i] = wire.EventOf(ev)
		}
		writeJSON(w, http.StatusOK, collection{Data: out, Meta: m})
		return nil
	}
}

// collection is a list's envelope, as encoding/json writes it (the agent
// list's hand-written encoder matches it byte for byte).
type collection struct {
	Data any  `json:"data"`
	Meta meta `json:"meta"`
}

func handleGetEvent(st *store.Store) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		k := authFrom(r.Context()).key
		id := r.PathValue("event_id")
		ev, err := st.GetEvent(r.Context(), k.AccountID, id)
		if err == nil && len(k.AgentIDs) > 0 && (ev.AgentID == "" || !k.AllowsAgent(ev.AgentID)) {
			err = domain.ErrNotFound // outside the key's restriction: as if absent
		}
		if errors.Is(err, domain.ErrNotFound) {
			return domain.Errorf(domain.CodeNotFound, "No event %q in this account.", echo(id))
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, single{Data: wire.EventOf(ev)})
		return nil
	}
}

// endpointParams decodes a create's or an update's body.
func endpointParams(w http.ResponseWriter, r *http.Request, create bool) (webhooks.Params, error) {
	var p problems
	p.query(r)
	allowed := []string{"url", "description", "enabled_events"}
	if !create {
		allowed = append(allowed, "status")
	}
	obj := p.object(w, r, allowed...)
	var out webhooks.Params
	if raw, ok := obj["url"]; ok {
		if s, ok := p.str(raw, "url"); ok {
			out.URL = &s
		}
	}
	if raw, ok := obj["description"]; ok {
		if s, ok := p.str(raw, "description"); ok {
			out.Description = &s
		}
	}
	if raw, ok := obj["enabled_events"]; ok {
		if list, ok := stringList(&p, raw, "enabled_events"); ok {
			out.EnabledEvents = &list
		}
	}
	if raw, ok := obj["status"]; ok {
		out.Disabled = endpointStatus(&p, raw)
	}
	return out, p.err()
}

// maxEnabledEvents bounds enabled_events' length: more entries than there
// are types and families can only repeat them.
const maxEnabledEvents = 32

func stringList(p *problems, raw json.RawMessage, field string) ([]string, bool) {
	var list []string
	if jsonKind(raw) != "array" || len(raw) > 4096 || json.Unmarshal(raw, &list) != nil {
		p.add(field, domain.CodeDatatypeMismatch, "%s must be an array of strings.", field)
		return nil, false
	}
	if len(list) > maxEnabledEvents {
		p.add(field, domain.CodeInvalidValue, "%s may have at most %d entries.", field, maxEnabledEvents)
		return nil, false
	}
	return list, true
}

func endpointStatus(p *problems, raw json.RawMessage) *bool {
	s, ok := p.str(raw, "status")
	if !ok {
		return nil
	}
	switch s {
	case domain.WebhookEnabled:
		f := false
		return &f
	case domain.WebhookDisabled:
		t := true
		return &t
	}
	p.add("status", domain.CodeInvalidValue, "status must be enabled or disabled.")
	return nil
}

func writeEndpoint(w http.ResponseWriter, status int, e domain.WebhookEndpoint, secret string) {
	out := wire.WebhookEndpointOf(e)
	out.Secret = secret
	if secret != "" && e.OldSecretExpiresAt != nil {
		out.OldSecretExpiresAt = wire.TimePtr(e.OldSecretExpiresAt)
	}
	writeJSON(w, status, single{Data: out})
}

func handleCreateEndpoint(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		p, err := endpointParams(w, r, true)
		if err != nil {
			return err
		}
		c, err := svc.Create(r.Context(), webhookActor(r), p)
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/v1/webhook-endpoints/"+c.Endpoint.ID)
		writeEndpoint(w, http.StatusCreated, c.Endpoint, c.Secret)
		return nil
	}
}

func handleListEndpoints(svc *webhooks.Service, cursors *cursorSigner) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		actor := webhookActor(r)
		var p problems
		q := p.query(r, "limit", "next")
		rawLimit, given := q["limit"]
		limit := parseLimit(rawLimit, given)
		var after cursor
		if v, ok := q["next"]; ok {
			if after, ok = decodeCursor(cursors, actor.AccountID, "endpoints", v); !ok {
				p.add("next", domain.CodeInvalidValue,
					"next is not a cursor of this query; copy meta.next from the previous page of the same query.")
			}
		}
		if err := p.err(); err != nil {
			return err
		}
		// An account has at most 16 endpoints: they are read whole.
		list, err := svc.List(r.Context(), actor)
		if err != nil {
			return err
		}
		list = endpointsAfter(list, after)
		m := meta{Limit: limit, HasMore: len(list) > limit}
		if m.HasMore {
			list = list[:limit]
			last := list[len(list)-1]
			next := encodeCursor(cursors, actor.AccountID, "endpoints", cursor{createdAt: last.CreatedAt, id: last.ID})
			m.Next = &next
		}
		out := make([]wire.WebhookEndpoint, len(list))
		for i, e := range list {
			out[i] = wire.WebhookEndpointOf(e)
		}
		writeJSON(w, http.StatusOK, collection{Data: out, Meta: m})
		return nil
	}
}

// endpointsAfter drops the endpoints up to and including c in the list's
// order (created_at, id).
func endpointsAfter(list []domain.WebhookEndpoint, c cursor) []domain.WebhookEndpoint {
	if c.id == "" {
		return list
	}
	for i, e := range list {
		if e.CreatedAt.After(c.createdAt) || e.CreatedAt.Equal(c.createdAt) && e.ID > c.id {
			return list[i:]
		}
	}
	return nil
}

func handleGetEndpoint(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		e, err := svc.Get(r.Context(), webhookActor(r), r.PathValue("endpoint_id"))
		if err != nil {
			return err
		}
		writeEndpoint(w, http.StatusOK, e, "")
		return nil
	}
}

func handleUpdateEndpoint(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		p, err := endpointParams(w, r, false)
		if err != nil {
			return err
		}
		e, err := svc.Update(r.Context(), webhookActor(r), r.PathValue("endpoint_id"), p)
		if err != nil {
			return err
		}
		writeEndpoint(w, http.StatusOK, e, "")
		return nil
	}
}

func handleDeleteEndpoint(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		if err := svc.Delete(r.Context(), webhookActor(r), r.PathValue("endpoint_id")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func handleRotateSecret(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var p problems
		p.query(r)
		obj := p.object(w, r, "old_secret_expires_in")
		overlap := webhooks.DefaultOldSecretOverlap
		if raw, ok := obj["old_secret_expires_in"]; ok {
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if jsonKind(raw) != "number" || err != nil || n < 0 || n > int64(webhooks.MaxOldSecretOverlap/time.Second) {
				p.add("old_secret_expires_in", domain.CodeInvalidValue,
					"old_secret_expires_in must be a whole number of seconds from 0 to %d.", int64(webhooks.MaxOldSecretOverlap/time.Second))
			}
			overlap = time.Duration(n) * time.Second
		}
		if err := p.err(); err != nil {
			return err
		}
		c, err := svc.RotateSecret(r.Context(), webhookActor(r), r.PathValue("endpoint_id"), overlap)
		if err != nil {
			return err
		}
		writeEndpoint(w, http.StatusOK, c.Endpoint, c.Secret)
		return nil
	}
}

func handleTestEndpoint(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		ev, err := svc.SendTest(r.Context(), webhookActor(r), r.PathValue("endpoint_id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusAccepted, single{Data: wire.EventOf(ev)})
		return nil
	}
}

// attemptsQuery reads the deliveries log's query: status, event_id, limit
// and the cursor (bound to the endpoint and the filter).
func attemptsQuery(r *http.Request, cursors *cursorSigner, account string) (store.AttemptQuery, string, error) {
	var p problems
	q := p.query(r, "limit", "next", "status", "event_id")
	rawLimit, given := q["limit"]
	aq := store.AttemptQuery{AccountID: account, EndpointID: r.PathValue("endpoint_id"), Limit: parseLimit(rawLimit, given)}
	if v, ok := q["status"]; ok {
		if v != "succeeded" && v != "failed" {
			p.add("status", domain.CodeInvalidValue, "status must be succeeded or failed.")
		}
		aq.Status = v
	}
	aq.EventID = q["event_id"]
	filter := "attempts?" + aq.EndpointID + "&status=" + aq.Status + "&event_id=" + aq.EventID
	if v, ok := q["next"]; ok {
		c, ok := decodeCursor(cursors, account, filter, v)
		if !ok {
			p.add("next", domain.CodeInvalidValue,
				"next is not a cursor of this query; copy meta.next from the previous page of the same query.")
		}
		aq.Before = store.Cursor{CreatedAt: c.createdAt, ID: c.id}
	}
	return aq, filter, p.err()
}

func handleListAttempts(svc *webhooks.Service, cursors *cursorSigner) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		actor := webhookActor(r)
		q, filter, err := attemptsQuery(r, cursors, actor.AccountID)
		if err != nil {
			return err
		}
		list, err := svc.Attempts(r.Context(), actor, q)
		if err != nil {
			return err
		}
		m := meta{Limit: q.Limit, HasMore: len(list) > q.Limit}
		if m.HasMore {
			list = list[:q.Limit]
			last := list[len(list)-1]
			next := encodeCursor(cursors, actor.AccountID, filter, cursor{createdAt: last.CreatedAt, id: last.ID})
			m.Next = &next
		}
		out := make([]wire.WebhookAttempt, len(list))
		for i, a := range list {
			out[i] = wire.WebhookAttemptOf(a)
		}
		writeJSON(w, http.StatusOK, collection{Data: out, Meta: m})
		return nil
	}
}

func handleResend(svc *webhooks.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		if err := svc.Resend(r.Context(), webhookActor(r), r.PathValue("endpoint_id"), r.PathValue("event_id")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
}
