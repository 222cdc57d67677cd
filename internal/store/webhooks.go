package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// ErrEndpointLimit is CreateWebhookEndpoint's refusal of an account's
// endpoint past domain.MaxWebhookEndpoints.
var ErrEndpointLimit = errors.New("the account has the most webhook endpoints it may have")

// deliveryWake is told after a commit that wrote deliveries, so that this
// instance's delivery worker need not wait for its next poll.
type deliveryWake struct{ fn atomic.Pointer[func()] }

// SetDeliveryWake makes every commit that writes deliveries call fn.
func (s *Store) SetDeliveryWake(fn func()) { s.wake.fn.Store(&fn) }

func (s *Store) deliveriesDue() {
	if fn := s.wake.fn.Load(); fn != nil {
		(*fn)()
	}
}

const endpointColumns = `id, account_id, url, description, enabled_events, status, disabled_reason, secret,
	old_secret, old_secret_expires_at, failing_since, created_at, updated_at`

func scanEndpoint(r interface{ Scan(...any) error }) (domain.WebhookEndpoint, error) {
	var (
		e                domain.WebhookEndpoint
		events           string
		oldExp, failing  sql.NullInt64
		created, updated int64
	)
	err := r.Scan(&e.ID, &e.AccountID, &e.URL, &e.Description, &events, &e.Status, &e.DisabledReason, &e.Secret,
		&e.OldSecret, &oldExp, &failing, &created, &updated)
	e.EnabledEvents = strings.Fields(events)
	e.OldSecretExpiresAt, e.FailingSince = fromNullMS(oldExp), fromNullMS(failing)
	e.CreatedAt, e.UpdatedAt = fromMS(created), fromMS(updated)
	return e, err
}

// CreateWebhookEndpoint stores e and ev; ErrEndpointLimit when the account
// has its most endpoints already.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint, ev domain.AuditEvent) error {
	return s.inTx(ctx, func(tx *Tx) error {
		// The account's row, held, makes concurrent creates count in turn.
		var locked string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE id = $1`+s.d.forUpdate, e.AccountID).Scan(&locked); err != nil {
			return rowErr("lock account", err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM webhook_endpoints WHERE account_id = $1`, e.AccountID).Scan(&n); err != nil {
			return fmt.Errorf("count endpoints: %w", err)
		}
		if n >= domain.MaxWebhookEndpoints {
			return ErrEndpointLimit
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (`+endpointColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			e.ID, e.AccountID, e.URL, e.Description, strings.Join(e.EnabledEvents, " "), e.Status, e.DisabledReason,
			e.Secret, e.OldSecret, toNullMS(e.OldSecretExpiresAt), toNullMS(e.FailingSince), toMS(e.CreatedAt), toMS(e.UpdatedAt))
		if err != nil {
			return fmt.Errorf("insert endpoint: %w", err)
		}
		return insertAuditEvents(ctx, tx, ev)
	})
}

// GetWebhookEndpoint reads one endpoint of the account.
func (s *Store) GetWebhookEndpoint(ctx context.Context, accountID, id string) (domain.WebhookEndpoint, error) {
	if !storable(accountID, id) {
		return domain.WebhookEndpoint{}, domain.ErrNotFound
	}
	e, err := scanEndpoint(s.r.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE id = $1 AND account_id = $2`, id, accountID))
	if err != nil {
		return domain.WebhookEndpoint{}, rowErr("get endpoint", err)
	}
	return e, nil
}

// ListWebhookEndpoints returns the account's endpoints (at most
// domain.MaxWebhookEndpoints), oldest first.
func (s *Store) ListWebhookEndpoints(ctx context.Context, accountID string) ([]domain.WebhookEndpoint, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE account_id = $1 ORDER BY created_at, id`, accountID)
	return collect("list endpoints", rows, err, func(r *sql.Rows) (domain.WebhookEndpoint, error) { return scanEndpoint(r) })
}

// UpdateWebhookEndpoint reads the endpoint in a transaction, lets fn change
// it, and when fn reports a change writes it with the audit entry audit
// makes of the two states. ErrNotFound unless it is in accountID.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, accountID, id string,
	fn func(*domain.WebhookEndpoint) (bool, error), audit func(before, after domain.WebhookEndpoint) domain.AuditEvent) (domain.WebhookEndpoint, error) {
	if !storable(accountID, id) {
		return domain.WebhookEndpoint{}, domain.ErrNotFound
	}
	var out domain.WebhookEndpoint
	err := s.inTx(ctx, func(tx *Tx) error {
		e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
			WHERE id = $1 AND account_id = $2`+s.d.forUpdate, id, accountID))
		if err != nil {
			return rowErr("get endpoint", err)
		}
		before := e
		changed, err := fn(&e)
		if err != nil {
			return err
		}
		out = e
		if !changed {
			return nil
		}
		if err := writeEndpoint(ctx, tx, e); err != nil {
			return err
		}
		return insertAuditEvents(ctx, tx, audit(before, e))
	})
	return out, err
}

func writeEndpoint(ctx context.Context, tx *Tx, e domain.WebhookEndpoint) error {
	_, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET url = $1, description = $2, enabled_events = $3,
		status = $4, disabled_reason = $5, secret = $6, old_secret = $7, old_secret_expires_at = $8,
		failing_since = $9, updated_at = $10 WHERE id = $11`,
		e.URL, e.Description, strings.Join(e.EnabledEvents, " "), e.Status, e.DisabledReason, e.Secret,
		e.OldSecret, toNullMS(e.OldSecretExpiresAt), toNullMS(e.FailingSince), toMS(e.UpdatedAt), e.ID)
	if err != nil {
		return fmt.Errorf("update endpoint: %w", err)
	}
	return nil
}

// DeleteWebhookEndpoint removes the endpoint, its deliveries and their
// attempts, and records ev. ErrNotFound unless it is in accountID.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, accountID, id string, ev domain.AuditEvent) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = $1 AND account_id = $2`, id, accountID)
		if err != nil {
			return fmt.Errorf("delete endpoint: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM webhook_deliveries WHERE endpoint_id = $1`, `DELETE FROM webhook_attempts WHERE endpoint_id = $1`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return fmt.Errorf("delete endpoint deliveries: %w", err)
			}
		}
		return insertAuditEvents(ctx, tx, ev)
	})
}

// SendTestEvent records a webhook.test event for the endpoint alone.
func (s *Store) SendTestEvent(ctx context.Context, ev domain.Event) (domain.Event, error) {
	err := s.inTx(ctx, func(tx *Tx) error {
		tx.record(ev)
		return nil
	})
	if err != nil {
		return domain.Event{}, err
	}
	return s.getAnyEvent(ctx, ev.AccountID, ev.ID)
}

func (s *Store) getAnyEvent(ctx context.Context, accountID, id string) (domain.Event, error) {
	ev, err := scanEvent(s.r.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = $1 AND account_id = $2`, id, accountID))
	if err != nil {
		return domain.Event{}, rowErr("get event", err)
	}
	return ev, nil
}

// ResendDelivery makes the event's delivery to the endpoint due now, with
// a fresh round of attempts; a delivery not made before (the endpoint came
// later, or did not subscribe) is created. ErrNotFound unless the endpoint
// and event are the account's.
func (s *Store) ResendDelivery(ctx context.Context, accountID, endpointID, eventID string, now time.Time) error {
	if !storable(accountID, endpointID, eventID) {
		return domain.ErrNotFound
	}
	err := s.inTx(ctx, func(tx *Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM webhook_endpoints WHERE id = $1 AND account_id = $2`,
			endpointID, accountID).Scan(&one); err != nil {
			return rowErr("get endpoint", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = $1 AND account_id = $2`,
			eventID, accountID).Scan(&one); err != nil {
			return rowErr("get event", err)
		}
		// An attempt in flight keeps its lease; its result is then
		// overwritten by this round's.
		_, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, account_id, status,
			next_attempt_at, created_at) VALUES ($1, $2, $3, 'pending', $4, $4)
			ON CONFLICT (endpoint_id, event_id) DO UPDATE SET status = 'pending', attempts = 0, next_attempt_at = $4`,
			endpointID, eventID, accountID, toMS(now))
		if err != nil {
			return fmt.Errorf("resend delivery: %w", err)
		}
		return nil
	})
	if err == nil {
		s.deliveriesDue()
	}
	return err
}

// Due is a delivery claimed for an attempt: the endpoint, the event, which
// attempt this is, and the lease's token that its result must carry.
type Due struct {
	Endpoint domain.WebhookEndpoint
	Event    domain.Event
	Attempt  int
	Token    string
}

// DueEndpoints lists enabled endpoints that have a delivery due at now and
// not leased, at most limit, in a random order: past limit, every such
// endpoint still gets its turns.
//
// Each endpoint's check is a scalar subquery with LIMIT 1, which
// PostgreSQL runs per endpoint on webhook_deliveries_due; as EXISTS it
// turned it into one semi-join over every due delivery (a sequential scan
// of 205 ms, every second, beside a backlog of 1,000,000: bench/RESULTS.md).
func (s *Store) DueEndpoints(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT e.id FROM webhook_endpoints e WHERE e.status = 'enabled'
		AND (SELECT d.next_attempt_at FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.status = 'pending'
			AND d.next_attempt_at <= $1 AND d.lease_until <= $1 ORDER BY d.next_attempt_at LIMIT 1) IS NOT NULL
		ORDER BY random() LIMIT $2`, toMS(now), limit)
	return collect("list due endpoints", rows, err, func(r *sql.Rows) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
}

// ClaimDeliveries leases up to n due deliveries of the endpoint until
// leaseUntil under token, oldest due first: while the lease holds, no other
// instance claims them. On PostgreSQL rows another instance is claiming
// are skipped, not waited for.
func (s *Store) ClaimDeliveries(ctx context.Context, endpointID, token string, now, leaseUntil time.Time, n int) ([]Due, error) {
	var out []Due
	err := s.inTx(ctx, func(tx *Tx) error {
		e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
			WHERE id = $1 AND status = 'enabled'`, endpointID))
		if err != nil {
			return rowErr("get endpoint", err)
		}
		rows, err := tx.QueryContext(ctx, `UPDATE webhook_deliveries SET lease_until = $1, lease_token = $2
			WHERE (endpoint_id, event_id) IN (SELECT endpoint_id, event_id FROM webhook_deliveries
				WHERE endpoint_id = $3 AND status = 'pending' AND next_attempt_at <= $4 AND lease_until <= $4
				ORDER BY next_attempt_at LIMIT $5`+s.d.skipLocked+`)
			RETURNING event_id, attempts`, toMS(leaseUntil), token, endpointID, toMS(now), n)
		type claimed struct {
			event    string
			attempts int
		}
		got, err := collect("claim deliveries", rows, err, func(r *sql.Rows) (claimed, error) {
			var c claimed
			return c, r.Scan(&c.event, &c.attempts)
		})
		if err != nil {
			return err
		}
		for _, c := range got {
			ev, err := scanEvent(tx.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = $1`, c.event))
			if err != nil {
				return rowErr("get event", err)
			}
			out = append(out, Due{Endpoint: e, Event: ev, Attempt: c.attempts + 1, Token: token})
		}
		return nil
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil // disabled or deleted meanwhile
	}
	return out, err
}

// Outcome is what an attempt's result does to its delivery and endpoint.
type Outcome struct {
	Attempt   domain.WebhookAttempt
	Token     string
	Delivered bool
	// Next is when to try again; nil: no more attempts (failed).
	Next *time.Time
	// Gone disables the endpoint at once (it answered 410); an endpoint
	// failing since FailingFor ago is disabled too.
	Gone       bool
	FailingFor time.Duration
}

// RecordAttempt stores an attempt's result, if the lease it was made under
// is still the delivery's: the attempt in the log, the delivery's new
// state, and the endpoint's failing clock. An endpoint disabled by it
// (gone, or failing too long) is audited and raises a
// webhook_endpoint.disabled event to the account's other endpoints. It
// reports the reason it disabled the endpoint, or "".
func (s *Store) RecordAttempt(ctx context.Context, o Outcome, disabledEvent func(domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error)) (string, error) {
	a := o.Attempt
	var reason string
	err := s.inTx(ctx, func(tx *Tx) error {
		status, next := domain.DeliveryFailed, a.CreatedAt
		switch {
		case o.Delivered:
			status = domain.DeliveryDelivered
		case o.Next != nil:
			status, next = domain.DeliveryPending, *o.Next
		}
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
			lease_until = 0, lease_token = '' WHERE endpoint_id = $4 AND event_id = $5 AND lease_token = $6`,
			status, a.Attempt, toMS(next), a.EndpointID, a.EventID, o.Token)
		if err != nil {
			return fmt.Errorf("update delivery: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err // the lease ran out and another instance took it: its result stands
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (id, endpoint_id, event_id, attempt, status,
			response_status, error, latency_ms, response_body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			a.ID, a.EndpointID, a.EventID, a.Attempt, a.Status, a.ResponseStatus, a.Error, a.LatencyMS,
			a.ResponseBody, toMS(a.CreatedAt)); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		reason, err = s.endpointAfterAttempt(ctx, tx, o, disabledEvent)
		return err
	})
	if errors.Is(err, domain.ErrNotFound) {
		return "", nil
	}
	return reason, err
}

// endpointAfterAttempt moves the endpoint's failing clock and disables it
// when o says so.
func (s *Store) endpointAfterAttempt(ctx context.Context, tx *Tx, o Outcome,
	disabledEvent func(domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error)) (string, error) {
	a := o.Attempt
	e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1`+s.d.forUpdate, a.EndpointID))
	if err != nil {
		return "", rowErr("get endpoint", err)
	}
	before := e
	switch {
	case o.Delivered:
		e.FailingSince = nil
	case e.FailingSince == nil:
		at := a.CreatedAt
		e.FailingSince = &at
	}
	if e.Status == domain.WebhookEnabled && (o.Gone || !o.Delivered && a.CreatedAt.Sub(*e.FailingSince) >= o.FailingFor) {
		e.Status, e.DisabledReason, e.UpdatedAt = domain.WebhookDisabled, domain.DisabledFailing, a.CreatedAt
		if o.Gone {
			e.DisabledReason = domain.DisabledGone
		}
	}
	if timesEqual(before.FailingSince, e.FailingSince) && before.Status == e.Status {
		return "", nil
	}
	if err := writeEndpoint(ctx, tx, e); err != nil || before.Status == e.Status {
		return "", err
	}
	ev, audit, err := disabledEvent(e)
	if err != nil {
		return "", err
	}
	tx.record(ev)
	return e.DisabledReason, insertAuditEvents(ctx, tx, audit)
}

func timesEqual(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

// AttemptQuery selects an endpoint's attempts, newest first.
type AttemptQuery struct {
	AccountID, EndpointID string
	Status                string // "", "succeeded" or "failed"
	EventID               string
	Before                Cursor // the last attempt of the previous page
	Limit                 int
}

// ListAttempts returns up to q.Limit+1 attempts of the endpoint, newest
// first, each with its event's type and its delivery's state now.
func (s *Store) ListAttempts(ctx context.Context, q AttemptQuery) ([]domain.WebhookAttempt, error) {
	if !storable(q.AccountID, q.EndpointID, q.EventID) {
		return nil, nil
	}
	var b builder
	b.add(`SELECT a.id, a.endpoint_id, a.event_id, COALESCE(ev.type, ''), a.attempt, a.status, a.response_status,
		a.error, a.latency_ms, a.response_body, a.created_at, COALESCE(d.status, ''), d.next_attempt_at
		FROM webhook_attempts a
		JOIN webhook_endpoints e ON e.id = a.endpoint_id
		LEFT JOIN events ev ON ev.id = a.event_id
		LEFT JOIN webhook_deliveries d ON d.endpoint_id = a.endpoint_id AND d.event_id = a.event_id
		WHERE a.endpoint_id = ` + b.arg(q.EndpointID) + ` AND e.account_id = ` + b.arg(q.AccountID))
	if q.Status != "" {
		b.add(` AND a.status = ` + b.arg(q.Status))
	}
	if q.EventID != "" {
		b.add(` AND a.event_id = ` + b.arg(q.EventID))
	}
	b.keyset("a.", q.Before, true, q.Limit)
	rows, err := s.r.QueryContext(ctx, b.b.String(), b.args...)
	return collect("list attempts", rows, err, scanAttempt)
}

func scanAttempt(r *sql.Rows) (domain.WebhookAttempt, error) {
	var (
		a       domain.WebhookAttempt
		typ     string
		created int64
		next    sql.NullInt64
	)
	err := r.Scan(&a.ID, &a.EndpointID, &a.EventID, &typ, &a.Attempt, &a.Status, &a.ResponseStatus, &a.Error,
		&a.LatencyMS, &a.ResponseBody, &created, &a.DeliveryStatus, &next)
	a.EventType, a.CreatedAt = domain.EventType(typ), fromMS(created)
	if a.DeliveryStatus == domain.DeliveryPending {
		a.NextAttemptAt = fromNullMS(next)
	}
	return a, err
}
