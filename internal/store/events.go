package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// Events are the outbox (docs/webhooks.md, Events): a write records its
// event on the transaction (Tx.record), and inTx writes every recorded
// event, numbered in the account's commit order, and one delivery row for
// each subscribed endpoint, as the last statements before it commits. A
// change and its event thus commit together or not at all.
//
// Key writes go through Tx.changeKey, which reads the key before and after
// the change, raises the key epoch and records the event: the one call a
// key write makes, so that neither can be forgotten.

// EventRetention is how long events, deliveries and their attempts are kept.
const EventRetention = 30 * 24 * time.Hour

// record adds ev to what tx writes before it commits.
func (tx *Tx) record(ev domain.Event) { tx.events = append(tx.events, ev) }

// keyEvent describes the event of a key write: its type and what the type
// adds (source, for api_key.leaked).
type keyEvent struct {
	typ   domain.EventType
	extra any
	// audit names who made the change, and is written with the event
	// unless the caller writes it (auditWritten).
	audit        []domain.AuditEvent
	auditWritten bool
	// actor, when set, is who the event names instead of the audit's.
	actor *domain.EventActor
}

// changeKey runs apply, which changes the key (accountID, id) in tx, and
// when the key changed as the API shows it (or was revoked), raises the key
// epoch and records the event (api_key.updated with previous_attributes),
// with the audit entries ke carries. apply reports ErrNotFound (or another
// error) to change nothing.
func (tx *Tx) changeKey(ctx context.Context, d dialect, accountID, id string, ke keyEvent, apply func() error) error {
	before, err := readKeyTx(ctx, tx, d, accountID, id)
	if err != nil {
		return err
	}
	if err := apply(); err != nil {
		return err
	}
	after, err := readKeyTx(ctx, tx, d, accountID, id)
	if err != nil {
		return err
	}
	prev, changed, err := keyDiff(before, after)
	if err != nil {
		return err
	}
	if !changed {
		return nil
	}
	if err := tx.keysChanged(ctx, accountID); err != nil {
		return err
	}
	if ke.typ != domain.EventKeyUpdated {
		prev = nil
	}
	if err := tx.recordKey(ctx, after, ke.typ, prev, ke.extra, ke.audit, ke.actor); err != nil {
		return err
	}
	if ke.auditWritten {
		return nil
	}
	for _, ev := range ke.audit {
		if err := insertKeyEvent(ctx, tx, ev); err != nil {
			return err
		}
	}
	return nil
}

// recordKey records a key event whose data is k as GET /me shows it.
func (tx *Tx) recordKey(ctx context.Context, k domain.APIKey, typ domain.EventType, prev json.RawMessage, extra any,
	audit []domain.AuditEvent, actor *domain.EventActor) error {
	data, err := json.Marshal(wire.MeOf(k))
	if err != nil {
		return fmt.Errorf("encode event data: %w", err)
	}
	if actor == nil {
		actor = actorOf(audit)
	}
	ev := domain.Event{AccountID: k.AccountID, Type: typ, Data: data, Previous: prev,
		RequestID: domain.RequestIDFrom(ctx), Actor: actor}
	if extra != nil {
		if ev.Extra, err = json.Marshal(extra); err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
	}
	tx.record(ev)
	return nil
}

// actorOf is who a key event's audit entries name: a user, support tooling
// or the service.
func actorOf(audit []domain.AuditEvent) *domain.EventActor {
	if len(audit) == 0 {
		return &domain.EventActor{Type: "system", ID: "system"}
	}
	a := audit[0]
	switch {
	case a.ActorID != "":
		return &domain.EventActor{Type: "user", ID: a.ActorID}
	case a.Actor == "support":
		return &domain.EventActor{Type: "system", ID: "support"}
	default:
		return &domain.EventActor{Type: "system", ID: "system"}
	}
}

// readKeyTx reads a key inside tx, holding its row on PostgreSQL so that the
// state it reads is the one the transaction's change applies to.
func readKeyTx(ctx context.Context, tx *Tx, d dialect, accountID, id string) (domain.APIKey, error) {
	k, err := scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys k
		WHERE k.id = $1 AND k.account_id = $2`+d.forUpdate, id, accountID))
	if err != nil {
		return domain.APIKey{}, rowErr("get key", err)
	}
	return k, nil
}

// keyView is what a key event compares: the key as GET /me shows it, the
// agent restriction and whether it is revoked.
type keyView struct {
	wire.Me
	AgentIDs []string `json:"ai_agent_ids"`
	Revoked  bool     `json:"-"`
}

// keyDiff is the old values of the fields of before that after changed,
// as a JSON object (previous_attributes), and whether anything changed.
// last_used_at is not a change.
func keyDiff(before, after domain.APIKey) (json.RawMessage, bool, error) {
	view := func(k domain.APIKey) keyView {
		me := wire.MeOf(k)
		me.LastUsedAt = nil
		return keyView{Me: me, AgentIDs: append([]string{}, k.AgentIDs...), Revoked: k.RevokedAt != nil}
	}
	b, a := view(before), view(after)
	prev, changed, err := diffObjects(b, a)
	if err != nil {
		return nil, false, err
	}
	return prev, changed || b.Revoked != a.Revoked, nil
}

// diffObjects is the fields of before's JSON object whose values differ in
// after's, with before's values.
func diffObjects(before, after any) (json.RawMessage, bool, error) {
	bm, err := objectFields(before)
	if err != nil {
		return nil, false, err
	}
	am, err := objectFields(after)
	if err != nil {
		return nil, false, err
	}
	prev := map[string]json.RawMessage{}
	for k, v := range bm {
		if !bytes.Equal(v, am[k]) {
			prev[k] = v
		}
	}
	if len(prev) == 0 {
		return nil, false, nil
	}
	out, err := json.Marshal(prev)
	if err != nil {
		return nil, false, fmt.Errorf("encode previous attributes: %w", err)
	}
	return out, true, nil
}

func objectFields(v any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode event data: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode event data: %w", err)
	}
	return m, nil
}

// recordAgent records an agent event whose data is a as a single-agent
// response shows it.
func (tx *Tx) recordAgent(ctx context.Context, a domain.Agent, typ domain.EventType, prev json.RawMessage) error {
	data, err := json.Marshal(wire.AgentOf(a))
	if err != nil {
		return fmt.Errorf("encode event data: %w", err)
	}
	tx.record(domain.Event{AccountID: a.AccountID, Type: typ, AgentID: a.ID, Data: data, Previous: prev,
		RequestID: domain.RequestIDFrom(ctx)})
	return nil
}

// agentEventType is the event of an agent update: enabling or disabling
// alone is its own type; any other change is ai_agent.updated, with the
// old values of what changed.
func agentEventType(before, after domain.Agent) (domain.EventType, json.RawMessage, error) {
	if before.Enabled != after.Enabled && before.Name == after.Name && before.Instructions == after.Instructions {
		if after.Enabled {
			return domain.EventAgentEnabled, nil, nil
		}
		return domain.EventAgentDisabled, nil, nil
	}
	b, a := wire.AgentOf(before), wire.AgentOf(after)
	b.UpdatedAt, a.UpdatedAt = "", ""
	prev, _, err := diffObjects(b, a)
	return domain.EventAgentUpdated, prev, err
}

// writeEvents writes tx's recorded events and their deliveries: per
// account, the next numbers of its counter (whose row the transaction then
// holds until it commits), the events, and one delivery for each enabled
// endpoint whose enabled_events select the event's type. It reports whether
// any delivery was written.
func writeEvents(ctx context.Context, tx *Tx, now time.Time) (bool, error) {
	byAccount := map[string][]*domain.Event{}
	var accounts []string
	for i := range tx.events {
		ev := &tx.events[i]
		if _, ok := byAccount[ev.AccountID]; !ok {
			accounts = append(accounts, ev.AccountID)
		}
		byAccount[ev.AccountID] = append(byAccount[ev.AccountID], ev)
	}
	slices.Sort(accounts) // one order for every writer: no deadlock between two
	delivered := false
	for _, acct := range accounts {
		evs := byAccount[acct]
		var last int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO event_counters (account_id, seq) VALUES ($1, $2)
			ON CONFLICT (account_id) DO UPDATE SET seq = event_counters.seq + $2 RETURNING seq`,
			acct, len(evs)).Scan(&last); err != nil {
			return false, fmt.Errorf("number events: %w", err)
		}
		endpoints, err := subscribedEndpoints(ctx, tx, acct)
		if err != nil {
			return false, err
		}
		for i, ev := range evs {
			ev.Seq = last - int64(len(evs)) + int64(i) + 1
			n, err := insertEvent(ctx, tx, ev, endpoints, now)
			if err != nil {
				return false, err
			}
			delivered = delivered || n > 0
		}
	}
	return delivered, nil
}

type endpointEvents struct {
	id     string
	events []string
}

func subscribedEndpoints(ctx context.Context, tx *Tx, accountID string) ([]endpointEvents, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, enabled_events FROM webhook_endpoints
		WHERE account_id = $1 AND status = 'enabled' ORDER BY id`, accountID)
	return collect("list subscribed endpoints", rows, err, func(r *sql.Rows) (endpointEvents, error) {
		var e endpointEvents
		var list string
		err := r.Scan(&e.id, &list)
		e.events = strings.Fields(list)
		return e, err
	})
}

// insertEvent writes ev and its deliveries; a test event goes only to the
// endpoint it names (ev.Endpoint) and is never listed.
func insertEvent(ctx context.Context, tx *Tx, ev *domain.Event, endpoints []endpointEvents, now time.Time) (int, error) {
	if ev.ID == "" {
		ev.ID = domain.NewID("evt", now)
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = now
	}
	ev.CreatedAt = msTime(ev.CreatedAt)
	actorType, actorID := "", ""
	if ev.Actor != nil {
		actorType, actorID = ev.Actor.Type, ev.Actor.ID
	}
	test := ev.Type == domain.EventWebhookTest
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, account_id, seq, type, created_at, request_id,
		actor_type, actor_id, agent_id, data, previous, extra, test)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		ev.ID, ev.AccountID, ev.Seq, string(ev.Type), toMS(ev.CreatedAt), ev.RequestID, actorType, actorID,
		ev.AgentID, string(ev.Data), string(ev.Previous), string(ev.Extra), test); err != nil {
		return 0, fmt.Errorf("insert event: %w", err)
	}
	if err := insertMail(ctx, tx, ev, now); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range endpoints {
		if test && e.id != ev.Endpoint || !test && !domain.EventMatches(e.events, ev.Type) {
			continue
		}
		if ev.Type == domain.EventWebhookEndpointDisabled && e.id == ev.Endpoint {
			continue // the disabled endpoint is told nothing more
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, account_id, status,
			next_attempt_at, created_at) VALUES ($1, $2, $3, 'pending', $4, $4)`,
			e.id, ev.ID, ev.AccountID, toMS(now)); err != nil {
			return 0, fmt.Errorf("insert delivery: %w", err)
		}
		n++
	}
	return n, nil
}

// EventQuery selects an account's events for GET /v1/events.
type EventQuery struct {
	AccountID string
	Types     []string // types and families; none: every type
	AgentIDs  []string // set for a key restricted to agents: only their ai_agent events
	Since     *time.Time
	AfterSeq  int64
	// AfterID, when set, starts the list after that event (ErrNotFound
	// unless it is the account's).
	AfterID string
	Limit   int
}

const eventColumns = `id, account_id, seq, type, created_at, request_id, actor_type, actor_id, agent_id, data, previous, extra`

func scanEvent(r interface{ Scan(...any) error }) (domain.Event, error) {
	var (
		ev                      domain.Event
		typ, actorType, actorID string
		data, prev, extra       string
		created                 int64
	)
	if err := r.Scan(&ev.ID, &ev.AccountID, &ev.Seq, &typ, &created, &ev.RequestID, &actorType, &actorID,
		&ev.AgentID, &data, &prev, &extra); err != nil {
		return domain.Event{}, err
	}
	ev.Type, ev.CreatedAt = domain.EventType(typ), fromMS(created)
	if actorType != "" {
		ev.Actor = &domain.EventActor{Type: actorType, ID: actorID}
	}
	ev.Data = json.RawMessage(data)
	if prev != "" {
		ev.Previous = json.RawMessage(prev)
	}
	if extra != "" {
		ev.Extra = json.RawMessage(extra)
	}
	return ev, nil
}

// ListEvents returns up to q.Limit+1 events after q.AfterSeq in commit
// order (the extra one tells the caller there are more).
func (s *Store) ListEvents(ctx context.Context, q EventQuery) ([]domain.Event, error) {
	if !storable(q.AccountID) {
		return nil, nil
	}
	if q.AfterID != "" {
		if !storable(q.AfterID) {
			return nil, domain.ErrNotFound
		}
		err := s.r.QueryRowContext(ctx, `SELECT seq FROM events WHERE id = $1 AND account_id = $2 AND test = FALSE`,
			q.AfterID, q.AccountID).Scan(&q.AfterSeq)
		if err != nil {
			return nil, rowErr("get event", err)
		}
	}
	var b builder
	b.add(`SELECT ` + eventColumns + ` FROM events WHERE account_id = ` + b.arg(q.AccountID) +
		` AND test = FALSE AND seq > ` + b.arg(q.AfterSeq))
	if q.Since != nil {
		b.add(` AND created_at >= ` + b.arg(toMS(*q.Since)))
	}
	eventTypeFilter(&b, q.Types)
	if q.AgentIDs != nil {
		b.add(` AND type LIKE 'ai_agent.%' AND agent_id IN (`)
		for i, id := range q.AgentIDs {
			if i > 0 {
				b.add(", ")
			}
			b.add(b.arg(id))
		}
		if len(q.AgentIDs) == 0 {
			b.add("''")
		}
		b.add(`)`)
	}
	b.add(` ORDER BY seq LIMIT ` + b.arg(q.Limit+1))
	rows, err := s.r.QueryContext(ctx, b.b.String(), b.args...)
	return collect("list events", rows, err, func(r *sql.Rows) (domain.Event, error) { return scanEvent(r) })
}

// eventTypeFilter adds the condition that the type is one of types or in
// one of the families among them.
func eventTypeFilter(b *builder, types []string) {
	if len(types) == 0 {
		return
	}
	b.add(` AND (`)
	for i, t := range types {
		if i > 0 {
			b.add(` OR `)
		}
		if fam, ok := strings.CutSuffix(t, ".*"); ok {
			b.add(`type LIKE ` + b.arg(fam+".%"))
		} else {
			b.add(`type = ` + b.arg(t))
		}
	}
	b.add(`)`)
}

// GetEvent reads one listed event of the account; ErrNotFound otherwise.
func (s *Store) GetEvent(ctx context.Context, accountID, id string) (domain.Event, error) {
	if !storable(accountID, id) {
		return domain.Event{}, domain.ErrNotFound
	}
	ev, err := scanEvent(s.r.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events
		WHERE id = $1 AND account_id = $2 AND test = FALSE`, id, accountID))
	if err != nil {
		return domain.Event{}, rowErr("get event", err)
	}
	return ev, nil
}

// DeleteOldEvents removes events, deliveries, attempts and mail rows older than
// before, at most limit rows of each table a call; it returns how many
// rows it removed.
func (s *Store) DeleteOldEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	var total int64
	for _, q := range []string{
		`DELETE FROM events WHERE id IN (SELECT id FROM events WHERE created_at < $1 LIMIT $2)`,
		`DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts WHERE created_at < $1 LIMIT $2)`,
		`DELETE FROM webhook_deliveries WHERE (endpoint_id, event_id) IN
			(SELECT endpoint_id, event_id FROM webhook_deliveries WHERE created_at < $1 LIMIT $2)`,
		`DELETE FROM mail_deliveries WHERE event_id IN (SELECT event_id FROM mail_deliveries WHERE created_at < $1 LIMIT $2)`,
	} {
		err := s.inTx(ctx, func(tx *Tx) error {
			res, err := tx.ExecContext(ctx, q, toMS(before), limit)
			if err != nil {
				return fmt.Errorf("delete old events: %w", err)
			}
			n, err := res.RowsAffected()
			total += n
			return err
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
