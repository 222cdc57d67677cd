package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// keyColumns reads a key with its agent restriction, aggregated in order
// (string_agg with ORDER BY: PostgreSQL, and SQLite since 3.44).
const keyColumns = `k.id, k.account_id, k.name, k.description, k.prefix, k.env, k.hash, k.scopes,
	k.rate_limit_per_minute, k.last_used_at, k.expires_at, k.created_at, k.created_by,
	k.revoked_at, k.revoked_by, k.rotated_from, k.allowed_ips,
	(SELECT string_agg(r.agent_id, ' ' ORDER BY r.pos) FROM api_key_agents r WHERE r.key_id = k.id)`

// keyByPrefixSQL is the authentication hot path: one indexed lookup by the
// unique prefix, the account's active flag and key epoch by their primary
// keys, and the restriction by the primary key of api_key_agents.
const keyByPrefixSQL = `SELECT ` + keyColumns + `, a.active,
	COALESCE((SELECT e.epoch FROM account_key_epochs e WHERE e.account_id = k.account_id), 0)
	FROM api_keys k JOIN accounts a ON a.id = k.account_id
	WHERE k.prefix = $1`

func scanKey(row interface{ Scan(...any) error }, extra ...any) (domain.APIKey, error) {
	var (
		k                          domain.APIKey
		env, scopes, allowed       string
		lastUsed, expires, revoked sql.NullInt64
		created                    int64
		agents                     sql.NullString
	)
	dest := []any{&k.ID, &k.AccountID, &k.Name, &k.Description, &k.Prefix, &env, &k.Hash, &scopes,
		&k.RateLimitPerMinute, &lastUsed, &expires, &created, &k.CreatedBy,
		&revoked, &k.RevokedBy, &k.RotatedFrom, &allowed, &agents}
	var err error
	if err = row.Scan(append(dest, extra...)...); err != nil {
		return domain.APIKey{}, err
	}
	k.Env = domain.Env(env)
	k.Scopes = splitList[domain.Scope](scopes)
	k.AgentIDs = splitList[string](agents.String)
	if k.AllowedIPs, err = domain.NewAllowList(strings.Fields(allowed)); err != nil {
		return domain.APIKey{}, fmt.Errorf("key %s: stored allowed_ips: %w", k.ID, err)
	}
	k.LastUsedAt, k.ExpiresAt, k.RevokedAt = fromNullMS(lastUsed), fromNullMS(expires), fromNullMS(revoked)
	k.CreatedAt = fromMS(created)
	return k, nil
}

// CreateKey stores k, its agent restriction and its audit events in one
// transaction.
func (s *Store) CreateKey(ctx context.Context, k domain.APIKey, evs ...domain.AuditEvent) error {
	return s.createKey(ctx, k, nil, evs...)
}

// createKey is CreateKey, running also (when set) in the same transaction
// after the key is stored (console_pages.go: a rotation's old key).
func (s *Store) createKey(ctx context.Context, k domain.APIKey, also func(*Tx) error, evs ...domain.AuditEvent) error {
	err := s.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, account_id, name, description, prefix, env, hash,
			scopes, rate_limit_per_minute, last_used_at, expires_at, created_at, created_by,
			revoked_at, revoked_by, rotated_from, allowed_ips)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
			k.ID, k.AccountID, k.Name, k.Description, k.Prefix, string(k.Env), k.Hash,
			joinList(k.Scopes), k.RateLimitPerMinute, toNullMS(k.LastUsedAt), toNullMS(k.ExpiresAt),
			toMS(k.CreatedAt), k.CreatedBy, toNullMS(k.RevokedAt), k.RevokedBy, k.RotatedFrom,
			strings.Join(k.AllowedIPs.Strings(), " "))
		if err != nil {
			return fmt.Errorf("insert key: %w", err)
		}
		if err := insertKeyAgents(ctx, tx, k.ID, k.AgentIDs); err != nil {
			return err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		created, err := readKeyTx(ctx, tx, s.d, k.AccountID, k.ID)
		if err != nil {
			return err
		}
		if err := tx.recordKey(ctx, created, domain.EventKeyCreated, nil, nil, evs, nil); err != nil {
			return err
		}
		return insertAuditEvents(ctx, tx, evs...)
	})
	if isUnique(err) {
		// After the rollback: whatever holds the prefix has committed.
		var id string
		if qerr := s.r.QueryRowContext(ctx, `SELECT id FROM api_keys WHERE prefix = $1`, k.Prefix).Scan(&id); qerr != nil {
			id = k.ID // the id itself collided
		}
		return &domain.DuplicateError{ExistingID: id}
	}
	return err
}

// insertKeyAgents stores the restriction in as few statements as the
// engines' parameter limits allow (SQLite: 32766).
func insertKeyAgents(ctx context.Context, tx *Tx, keyID string, agentIDs []string) error {
	var ids []string
	for _, id := range agentIDs {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	pos := 0
	for batch := range slices.Chunk(ids, 500) {
		var b builder
		b.add(`INSERT INTO api_key_agents (key_id, agent_id, pos) VALUES `)
		key := b.arg(keyID)
		for i, id := range batch {
			if i > 0 {
				b.add(", ")
			}
			b.add("(" + key + ", " + b.arg(id) + ", " + b.arg(pos) + ")")
			pos++
		}
		if _, err := tx.ExecContext(ctx, b.b.String(), b.args...); err != nil {
			return fmt.Errorf("insert key agents: %w", err)
		}
	}
	return nil
}

// ReadKeyByPrefix is the authentication hot path's read: the key with that
// prefix and whether its account is active, from the database (keys'
// key cache holds what it returns). ErrNotFound when no key has the prefix.
func (s *Store) ReadKeyByPrefix(ctx context.Context, prefix string) (k domain.APIKey, accountActive bool, err error) {
	h, err := s.ReadHeldKey(ctx, prefix)
	return h.Key, h.AccountActive, err
}

// HeldKey is a key as authentication holds it: with its account's active
// flag and the key epoch of its account's last key change (0: none),
// read in one statement.
type HeldKey struct {
	Key           domain.APIKey
	AccountActive bool
	AccountEpoch  int64
}

// ReadHeldKey is ReadKeyByPrefix with the account's key epoch.
func (s *Store) ReadHeldKey(ctx context.Context, prefix string) (HeldKey, error) {
	if !storable(prefix) {
		return HeldKey{}, domain.ErrNotFound
	}
	ctx, cancel := s.authRead(ctx)
	defer cancel()
	var h HeldKey
	k, err := scanKey(s.keyByPrefix.QueryRowContext(ctx, prefix), &h.AccountActive, &h.AccountEpoch)
	if err != nil {
		return HeldKey{}, rowErr("key by prefix", hung(ctx, err))
	}
	h.Key = k
	return h, nil
}

// GetKey returns ErrNotFound unless the key exists in accountID.
func (s *Store) GetKey(ctx context.Context, accountID, id string) (domain.APIKey, error) {
	if !storable(accountID, id) {
		return domain.APIKey{}, domain.ErrNotFound
	}
	k, err := scanKey(s.r.QueryRowContext(ctx,
		`SELECT `+keyColumns+` FROM api_keys k WHERE k.id = $1 AND k.account_id = $2`, id, accountID))
	return k, rowErr("get key", err)
}

// GetKeyByID finds a key in any account (support tooling).
func (s *Store) GetKeyByID(ctx context.Context, id string) (domain.APIKey, error) {
	if !storable(id) {
		return domain.APIKey{}, domain.ErrNotFound
	}
	k, err := scanKey(s.r.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys k WHERE k.id = $1`, id))
	return k, rowErr("get key", err)
}

// ListKeys returns the account's keys in creation order.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]domain.APIKey, error) {
	if !storable(accountID) {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx,
		`SELECT `+keyColumns+` FROM api_keys k WHERE k.account_id = $1 ORDER BY k.created_at, k.id`, accountID)
	return collect("list keys", rows, err, scanKeyRow)
}

func scanKeyRow(rows *sql.Rows) (domain.APIKey, error) { return scanKey(rows) }

// RevokeKey marks the key revoked at `at` by user `by` and records ev and
// the api_key.revoked event, in one transaction. ErrNotFound unless the key
// is in accountID. Revoking a revoked key changes nothing and is not an
// error.
func (s *Store) RevokeKey(ctx context.Context, accountID, id, by string, at time.Time, ev domain.AuditEvent) error {
	return s.revokeKey(ctx, accountID, id, by, at, keyEvent{typ: domain.EventKeyRevoked, audit: []domain.AuditEvent{ev}})
}

// RevokeLeakedKey is RevokeKey for a key a secret-scanning report found in
// public: its event is api_key.leaked, carrying source.
func (s *Store) RevokeLeakedKey(ctx context.Context, accountID, id string, at time.Time, source any, ev domain.AuditEvent) error {
	return s.revokeKey(ctx, accountID, id, "", at, keyEvent{typ: domain.EventKeyLeaked,
		extra: map[string]any{"source": source}, audit: []domain.AuditEvent{ev},
		actor: &domain.EventActor{Type: "system", ID: "secret_scanning"}})
}

func (s *Store) revokeKey(ctx context.Context, accountID, id, by string, at time.Time, ke keyEvent) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		// Revoked already: the row lock of the UPDATE makes that final,
		// and changeKey then records nothing.
		return tx.changeKey(ctx, s.d, accountID, id, ke, func() error {
			_, err := tx.ExecContext(ctx,
				`UPDATE api_keys SET revoked_at = $1, revoked_by = $2
				WHERE id = $3 AND account_id = $4 AND revoked_at IS NULL`,
				toMS(at), by, id, accountID)
			if err != nil {
				return fmt.Errorf("revoke key: %w", err)
			}
			return nil
		})
	})
}

// SetKeyRateLimit sets the ceiling and records ev. Setting the ceiling a
// key already has changes nothing: no write, no event, no epoch bump.
// ErrNotFound for an unknown id, ErrRevoked (and no change) for a revoked
// key.
func (s *Store) SetKeyRateLimit(ctx context.Context, id string, n int, ev domain.AuditEvent) error {
	if !storable(id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		var accountID string
		if err := tx.QueryRowContext(ctx, `SELECT account_id FROM api_keys WHERE id = $1`, id).Scan(&accountID); err != nil {
			return rowErr("get key", err)
		}
		// The condition is in the UPDATE, not read before it, so that two
		// support sessions setting the same value record one change
		// (PostgreSQL re-checks it on the row the first one updated).
		return tx.changeKey(ctx, s.d, accountID, id, keyEvent{typ: domain.EventKeyUpdated, audit: []domain.AuditEvent{ev}}, func() error {
			res, err := tx.ExecContext(ctx,
				`UPDATE api_keys SET rate_limit_per_minute = $1
				WHERE id = $2 AND revoked_at IS NULL AND rate_limit_per_minute <> $1`, n, id)
			if err != nil {
				return fmt.Errorf("update key rate limit: %w", err)
			}
			if err := checkAffected(res); errors.Is(err, domain.ErrNotFound) {
				return whyUnchanged(ctx, tx, "", id) // nil: already n
			}
			return err
		})
	})
}

// TouchKeys stores last_used_at for many keys, never moving one backwards,
// and raises after_idle for a key it finds unused for a month before.
func (s *Store) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	// One order for every instance, so that two flushing at once cannot
	// deadlock on PostgreSQL's row locks.
	ids := make([]string, 0, len(used))
	for id := range used {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return s.inTx(ctx, func(tx *Tx) error {
		// A use after an idle month is an anomaly (anomalies.go): found
		// here, from the last_used_at this write replaces.
		idle, err := idleCandidates(ctx, tx, used, ids)
		if err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx,
			`UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)`)
		if err != nil {
			return fmt.Errorf("prepare touch: %w", err)
		}
		defer stmt.Close()
		for _, id := range ids {
			if k, ok := idle[id]; ok {
				if err := touchAfterIdle(ctx, tx, id, used[id], k); err != nil {
					return err
				}
			}
			if _, err := stmt.ExecContext(ctx, toMS(used[id]), id); err != nil {
				return fmt.Errorf("touch key %s: %w", id, err)
			}
		}
		return nil
	})
}

func (s *Store) AddAuditEvent(ctx context.Context, ev domain.AuditEvent) error {
	return s.inTx(ctx, func(tx *Tx) error { return insertAuditEvents(ctx, tx, ev) })
}

// keyUpdated is nil when res, an UPDATE of key id that requires it
// unrevoked, changed its row; else ErrRevoked when the key is revoked, or
// ErrNotFound (not in accountID, or another condition of the UPDATE did
// not hold).
func keyUpdated(ctx context.Context, tx *Tx, res sql.Result, accountID, id string) error {
	err := checkAffected(res)
	if !errors.Is(err, domain.ErrNotFound) {
		return err
	}
	if err := whyUnchanged(ctx, tx, accountID, id); err != nil {
		return err
	}
	return domain.ErrNotFound
}

// whyUnchanged explains an UPDATE of key id that changed no row:
// ErrNotFound when there is no such key (in accountID, unless that is ""),
// ErrRevoked when it is revoked, else nil. A revocation that the UPDATE
// waited for (PostgreSQL re-checks its condition on the row as the
// revocation committed it) is seen here too, by this later statement.
func whyUnchanged(ctx context.Context, tx *Tx, accountID, id string) error {
	q, args := `SELECT CASE WHEN revoked_at IS NULL THEN 0 ELSE 1 END FROM api_keys WHERE id = $1`, []any{id}
	if accountID != "" {
		q, args = q+` AND account_id = $2`, append(args, accountID)
	}
	var revoked int
	if err := tx.QueryRowContext(ctx, q, args...).Scan(&revoked); err != nil {
		return rowErr("get key", err)
	}
	if revoked == 1 {
		return domain.ErrRevoked
	}
	return nil
}

// insertKeyEvent records ev, an event of a key whose row this transaction
// has just updated, last in that key's history. Each writer reads its
// clock before it waits for the row, so one that waited (for a revocation,
// say) can hold an earlier time than the change it waited for, and the
// history, in time order, would show the two the wrong way round: such an
// event takes the time 1 ms after the key's newest one, and an id of that
// time. The row stays locked until commit, so no other change of the key
// can come between.
func insertKeyEvent(ctx context.Context, tx *Tx, ev domain.AuditEvent) error {
	var lastAt int64
	var lastID string
	err := tx.QueryRowContext(ctx, `SELECT created_at, id FROM audit_events WHERE key_id = $1
		ORDER BY created_at DESC, id DESC LIMIT 1`, ev.KeyID).Scan(&lastAt, &lastID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("newest key event: %w", err)
	}
	if at := toMS(ev.CreatedAt); err == nil && (at < lastAt || at == lastAt && ev.ID <= lastID) {
		ev.CreatedAt = fromMS(lastAt + 1)
		ev.ID = domain.NewID(domain.PrefixEvent, ev.CreatedAt)
	}
	return insertAuditEvents(ctx, tx, ev)
}

func insertAuditEvents(ctx context.Context, tx *Tx, evs ...domain.AuditEvent) error {
	for _, ev := range evs {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_events (id, account_id, key_id, action, actor_id, actor, detail, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			ev.ID, ev.AccountID, ev.KeyID, ev.Action, ev.ActorID, ev.Actor, ev.Detail, toMS(ev.CreatedAt))
		if err != nil {
			return fmt.Errorf("insert audit event: %w", err)
		}
	}
	return nil
}

// ListAuditEvents returns the account's newest events first. A limit of 0
// or less returns them all.
func (s *Store) ListAuditEvents(ctx context.Context, accountID string, limit int) ([]domain.AuditEvent, error) {
	return s.listAuditEvents(ctx, accountID, "", limit)
}

// ListKeyAuditEvents returns one key's events, newest first: the key's
// history, read by key rather than by filtering the account's whole trail.
func (s *Store) ListKeyAuditEvents(ctx context.Context, accountID, keyID string) ([]domain.AuditEvent, error) {
	if !storable(accountID, keyID) {
		return nil, nil
	}
	return s.listAuditEvents(ctx, accountID, keyID, 0)
}

func (s *Store) listAuditEvents(ctx context.Context, accountID, keyID string, limit int) ([]domain.AuditEvent, error) {
	query := `SELECT ` + auditColumns + ` FROM audit_events WHERE account_id = $1`
	args := []any{accountID}
	if keyID != "" {
		args = append(args, keyID)
		query += fmt.Sprintf(` AND key_id = $%d`, len(args))
	}
	query += ` ORDER BY created_at DESC, id DESC`
	if limit > 0 {
		args = append(args, limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	return collect("list audit events", rows, err, scanAuditEvent)
}

// auditColumns are scanAuditEvent's.
const auditColumns = `id, account_id, key_id, action, actor_id, actor, detail, created_at`

func scanAuditEvent(rows *sql.Rows) (domain.AuditEvent, error) {
	var ev domain.AuditEvent
	var created int64
	err := rows.Scan(&ev.ID, &ev.AccountID, &ev.KeyID, &ev.Action, &ev.ActorID, &ev.Actor, &ev.Detail, &created)
	ev.CreatedAt = fromMS(created)
	return ev, err
}
