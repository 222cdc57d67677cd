package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// The console's lists, one page at a time: every query is a range scan of
// an index that also gives the order, bounded by a LIMIT, continuing
// strictly after the last row of the page before (keyset pagination, never
// OFFSET), so a page costs its length whatever the account holds.

// Cursor is where a page continues: strictly after the row with this
// creation time and id, in the list's order, or strictly before it when
// Back (the page before, read backwards). The zero Cursor is the first
// page.
type Cursor struct {
	CreatedAt time.Time
	ID        string
	Back      bool
}

// IsZero reports whether c is the first page.
func (c Cursor) IsZero() bool { return c.ID == "" }

// String is the cursor as a page link carries it.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	s := strconv.FormatInt(toMS(c.CreatedAt), 10) + "." + c.ID
	if c.Back {
		return "b" + s
	}
	return s
}

// ParseCursor reads Cursor.String's form; ok is false for anything else.
func ParseCursor(s string) (c Cursor, ok bool) {
	if s == "" {
		return Cursor{}, true
	}
	rest, back := strings.CutPrefix(s, "b")
	ms, id, found := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil || id == "" || len(id) > 64 || !storable(id) {
		return Cursor{}, false
	}
	return Cursor{CreatedAt: fromMS(n), ID: id, Back: back}, true
}

// MaxSearch bounds a search term, in bytes.
const MaxSearch = 200

// likeContains and likePrefix are LIKE patterns (ESCAPE '\') matching text
// that contains, or starts with, term, case-insensitively in ASCII (the
// column is compared through lower()).
func likeContains(term string) string { return "%" + likeEscape(term) + "%" }
func likePrefix(term string) string   { return likeEscape(term) + "%" }

func likeEscape(term string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(strings.ToLower(term))
}

// builder assembles one of this file's statements with numbered arguments.
type builder struct {
	b    strings.Builder
	args []any
}

func (q *builder) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *builder) add(s string) { q.b.WriteString(s) }

// keyset continues a list ordered by (created_at, id) of alias (newest
// first when desc) from c: the rows after it, or before it when c.Back,
// nearest first; and asks for limit+1 of them (page).
func (q *builder) keyset(alias string, c Cursor, desc bool, limit int) {
	if !c.IsZero() {
		op := " > ("
		if desc != c.Back {
			op = " < ("
		}
		q.add(` AND (` + alias + `created_at, ` + alias + `id)` + op + q.arg(toMS(c.CreatedAt)) + `, ` + q.arg(c.ID) + `)`)
	}
	q.add(order(alias, desc != c.Back) + ` LIMIT ` + q.arg(limit+1))
}

// order is keyset's ORDER BY.
func order(alias string, desc bool) string {
	if desc {
		return ` ORDER BY ` + alias + `created_at DESC, ` + alias + `id DESC`
	}
	return ` ORDER BY ` + alias + `created_at, ` + alias + `id`
}

// page runs b, which asked for limit+1 rows from from (keyset), and
// returns at most limit of them, in the list's order, with the cursor that
// goes on the same way when there were more (zero when this is the last
// page that way). at names the (created_at, id) a row is ordered by.
func page[T any](ctx context.Context, s *Store, what string, b *builder, limit int, from Cursor,
	scan func(*sql.Rows) (T, error), at func(T) Cursor) ([]T, Cursor, error) {
	rows, err := s.queryRead(ctx, b.b.String(), b.args...)
	out, err := collect(what+" page", rows, err, scan)
	if err != nil {
		return nil, Cursor{}, err
	}
	var more Cursor
	if len(out) > limit {
		out = out[:limit]
		more = at(out[limit-1])
		more.Back = from.Back
	}
	if from.Back {
		slices.Reverse(out)
	}
	return out, more, nil
}

// KeyPageQuery selects a page of an account's keys, newest first.
type KeyPageQuery struct {
	AccountID string
	// Search keeps keys whose name contains it or whose prefix starts
	// with it.
	Search string
	// Status keeps keys in that status at Now; "" keeps all.
	Status domain.KeyStatus
	Now    time.Time
	After  Cursor
	Limit  int
}

// KeyPage returns up to q.Limit keys and the cursor of the next page (zero
// when this is the last). The scan is api_keys_account backwards.
func (s *Store) KeyPage(ctx context.Context, q KeyPageQuery) ([]domain.APIKey, Cursor, error) {
	if !storable(q.AccountID, q.Search) || q.Limit <= 0 {
		return nil, Cursor{}, nil
	}
	var b builder
	b.add(`SELECT ` + keyColumns + ` FROM api_keys k WHERE k.account_id = ` + b.arg(q.AccountID))
	if q.Search != "" {
		b.add(` AND (lower(k.name) LIKE ` + b.arg(likeContains(q.Search)) + ` ESCAPE '\'` +
			` OR lower(k.prefix) LIKE ` + b.arg(likePrefix(q.Search)) + ` ESCAPE '\')`)
	}
	now := toMS(q.Now)
	switch q.Status {
	case domain.KeyActive:
		b.add(` AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ` + b.arg(now) + `)`)
	case domain.KeyExpired:
		b.add(` AND k.revoked_at IS NULL AND k.expires_at <= ` + b.arg(now))
	case domain.KeyRevoked:
		b.add(` AND k.revoked_at IS NOT NULL`)
	}
	b.keyset("k.", q.After, true, q.Limit)
	return page(ctx, s, "key", &b, q.Limit, q.After, scanKeyRow,
		func(k domain.APIKey) Cursor { return Cursor{CreatedAt: k.CreatedAt, ID: k.ID} })
}

// KeysRotatedFrom returns the account's keys that replace id, oldest first
// (by api_keys_rotated_from).
func (s *Store) KeysRotatedFrom(ctx context.Context, accountID, id string) ([]domain.APIKey, error) {
	if !storable(accountID, id) || id == "" {
		return nil, nil
	}
	rows, err := s.queryRead(ctx, `SELECT `+keyColumns+` FROM api_keys k
		WHERE k.rotated_from = $1 AND k.account_id = $2 ORDER BY k.created_at, k.id`, id, accountID)
	return collect("keys rotated from", rows, err, scanKeyRow)
}

// KeyNameTaken reports whether a key of the account has exactly this name
// (by api_keys_account_name).
func (s *Store) KeyNameTaken(ctx context.Context, accountID, name string) (bool, error) {
	if !storable(accountID, name) {
		return false, nil
	}
	var taken bool
	err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM api_keys WHERE account_id = $1 AND name = $2)`,
		accountID, name).Scan(&taken)
	if err != nil {
		return false, fmt.Errorf("key name taken: %w", err)
	}
	return taken, nil
}

// KeyLabel is what a list shows of a key it refers to.
type KeyLabel struct{ Name, Prefix string }

// KeyLabels returns the name and prefix of those of ids that are keys of the
// account (by primary key).
func (s *Store) KeyLabels(ctx context.Context, accountID string, ids []string) (map[string]KeyLabel, error) {
	return byIDs(ctx, s, `SELECT id, name, prefix FROM api_keys`, accountID, ids,
		func(l *KeyLabel) []any { return []any{&l.Name, &l.Prefix} })
}

// UserEmails returns the email of those of ids that are users of the
// account (by primary key).
func (s *Store) UserEmails(ctx context.Context, accountID string, ids []string) (map[string]string, error) {
	return byIDs(ctx, s, `SELECT id, email FROM users`, accountID, ids, func(v *string) []any { return []any{v} })
}

// AgentNames returns the name of those of ids that are agents of the
// account (by primary key).
func (s *Store) AgentNames(ctx context.Context, accountID string, ids []string) (map[string]string, error) {
	return byIDs(ctx, s, `SELECT id, name FROM agents`, accountID, ids, func(v *string) []any { return []any{v} })
}

// byIDs runs selectFrom, which reads the id and then what dest points
// into, with WHERE account_id = ? AND id IN (ids), in batches, and returns
// what each id read.
func byIDs[T any](ctx context.Context, s *Store, selectFrom, accountID string, ids []string, dest func(*T) []any) (map[string]T, error) {
	out := map[string]T{}
	want := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == "" || !storable(id) })
	slices.Sort(want)
	want = slices.Compact(want)
	if !storable(accountID) {
		return out, nil
	}
	for batch := range slices.Chunk(want, 500) {
		var b builder
		b.add(selectFrom + ` WHERE account_id = ` + b.arg(accountID) + ` AND id IN (`)
		for i, id := range batch {
			if i > 0 {
				b.add(", ")
			}
			b.add(b.arg(id))
		}
		b.add(")")
		rows, err := s.r.QueryContext(ctx, b.b.String(), b.args...)
		_, err = collect("read by ids", rows, err, func(r *sql.Rows) (struct{}, error) {
			var id string
			var v T
			if err := r.Scan(append([]any{&id}, dest(&v)...)...); err != nil {
				return struct{}{}, err
			}
			out[id] = v
			return struct{}{}, nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// AuditItem is an audit event with the name and prefix of its key ("" when
// the event names no key of the account).
type AuditItem struct {
	domain.AuditEvent
	KeyName, KeyPrefix string
}

// AuditPageQuery selects a page of an account's audit trail, newest first.
type AuditPageQuery struct {
	AccountID string
	// KeyID, when set, keeps one key's history (by audit_events_key).
	KeyID string
	// Search keeps events whose key's name contains it or whose key's
	// prefix starts with it, or whose actor contains it.
	Search string
	After  Cursor
	Limit  int
}

// AuditPage returns up to q.Limit events and the next page's cursor.
func (s *Store) AuditPage(ctx context.Context, q AuditPageQuery) ([]AuditItem, Cursor, error) {
	if !storable(q.AccountID, q.KeyID, q.Search) || q.Limit <= 0 {
		return nil, Cursor{}, nil
	}
	var b builder
	b.add(`SELECT e.id, e.account_id, e.key_id, e.action, e.actor_id, e.actor, e.detail, e.created_at,
		COALESCE(k.name, ''), COALESCE(k.prefix, '')
		FROM audit_events e LEFT JOIN api_keys k ON k.id = e.key_id AND k.account_id = e.account_id
		WHERE e.account_id = ` + b.arg(q.AccountID))
	if q.KeyID != "" {
		b.add(` AND e.key_id = ` + b.arg(q.KeyID))
	}
	if q.Search != "" {
		b.add(` AND (lower(k.name) LIKE ` + b.arg(likeContains(q.Search)) + ` ESCAPE '\'` +
			` OR lower(k.prefix) LIKE ` + b.arg(likePrefix(q.Search)) + ` ESCAPE '\'` +
			` OR lower(e.actor) LIKE ` + b.arg(likeContains(q.Search)) + ` ESCAPE '\')`)
	}
	b.keyset("e.", q.After, true, q.Limit)
	return page(ctx, s, "audit event", &b, q.Limit, q.After, func(rows *sql.Rows) (AuditItem, error) {
		var (
			it      AuditItem
			created int64
		)
		ev := &it.AuditEvent
		if err := rows.Scan(&ev.ID, &ev.AccountID, &ev.KeyID, &ev.Action, &ev.ActorID, &ev.Actor, &ev.Detail, &created,
			&it.KeyName, &it.KeyPrefix); err != nil {
			return it, err
		}
		ev.CreatedAt = fromMS(created)
		return it, nil
	}, func(it AuditItem) Cursor { return Cursor{CreatedAt: it.CreatedAt, ID: it.ID} })
}

// UserPageQuery selects a page of an account's users, oldest first.
type UserPageQuery struct {
	AccountID string
	// Search keeps users whose email contains it.
	Search string
	After  Cursor
	Limit  int
}

// UserPage returns up to q.Limit users and the next page's cursor (by
// users_account).
func (s *Store) UserPage(ctx context.Context, q UserPageQuery) ([]domain.User, Cursor, error) {
	if !storable(q.AccountID, q.Search) || q.Limit <= 0 {
		return nil, Cursor{}, nil
	}
	var b builder
	b.add(`SELECT ` + userColumns + ` FROM users WHERE account_id = ` + b.arg(q.AccountID))
	if q.Search != "" {
		b.add(` AND lower(email) LIKE ` + b.arg(likeContains(q.Search)) + ` ESCAPE '\'`)
	}
	b.keyset("", q.After, false, q.Limit)
	return page(ctx, s, "user", &b, q.Limit, q.After, scanUserRow,
		func(u domain.User) Cursor { return Cursor{CreatedAt: u.CreatedAt, ID: u.ID} })
}

// PickerAgent is an agent as the key form's picker lists it.
type PickerAgent struct {
	ID, Name string
	Enabled  bool
}

// AgentPickerPage returns up to limit agents of the account whose name
// contains search, by name (agents_name_key), strictly after the agent
// whose name key is after; and the name key to continue after ("" on the
// last page).
func (s *Store) AgentPickerPage(ctx context.Context, accountID, search, after string, limit int) ([]PickerAgent, string, error) {
	if !storable(accountID, search, after) || limit <= 0 {
		return nil, "", nil
	}
	var b builder
	b.add(`SELECT id, name, enabled, name_key FROM agents WHERE account_id = ` + b.arg(accountID))
	if search != "" {
		b.add(` AND lower(name) LIKE ` + b.arg(likeContains(search)) + ` ESCAPE '\'`)
	}
	if after != "" {
		b.add(` AND name_key > ` + b.arg(after))
	}
	b.add(` ORDER BY name_key LIMIT ` + b.arg(limit+1))
	rows, err := s.queryRead(ctx, b.b.String(), b.args...)
	var keys []string
	out, err := collect("agent picker", rows, err, func(r *sql.Rows) (a PickerAgent, err error) {
		var key string
		err = r.Scan(&a.ID, &a.Name, &a.Enabled, &key)
		keys = append(keys, key)
		return a, err
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = keys[limit-1]
	}
	return out, next, nil
}

// CreateKeyRetiring stores k like CreateKey and, in the same transaction,
// makes the key it replaces (oldID, of the same account) stop working at
// oldExpiresAt, unless that key is revoked or already expires sooner.
func (s *Store) CreateKeyRetiring(ctx context.Context, k domain.APIKey, oldID string, oldExpiresAt time.Time, evs ...domain.AuditEvent) error {
	return s.createKey(ctx, k, func(tx *Tx) error {
		at := toMS(oldExpiresAt)
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET expires_at = $1
			WHERE id = $2 AND account_id = $3 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)`,
			at, oldID, k.AccountID)
		if err != nil {
			return fmt.Errorf("retire old key: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("rows affected: %w", err)
		} else if n > 0 {
			// Instances hold keys in memory: the old key's new expiry
			// must reach them as a revocation does.
			return bumpKeyEpoch(ctx, tx)
		}
		return nil
	}, evs...)
}

// UpdateKeyText sets a key's name and description and records ev, in one
// transaction. ErrNotFound unless the key is in accountID.
func (s *Store) UpdateKeyText(ctx context.Context, accountID, id, name, description string, ev domain.AuditEvent) error {
	if !storable(accountID, id) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET name = $1, description = $2 WHERE id = $3 AND account_id = $4`,
			name, description, id, accountID)
		if err != nil {
			return fmt.Errorf("update key text: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		// GET /me shows the name, read from the instances' key memory.
		if err := bumpKeyEpoch(ctx, tx); err != nil {
			return err
		}
		return insertKeyEvent(ctx, tx, ev)
	})
}
