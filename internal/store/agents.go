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

// --- AI agents ---

const agentColumns = `id, account_id, name, instructions, enabled, created_at, updated_at`

func scanAgent(row interface{ Scan(...any) error }) (domain.Agent, error) {
	var (
		a                domain.Agent
		created, updated int64
	)
	if err := row.Scan(&a.ID, &a.AccountID, &a.Name, &a.Instructions, &a.Enabled, &created, &updated); err != nil {
		return domain.Agent{}, err
	}
	a.CreatedAt, a.UpdatedAt = fromMS(created), fromMS(updated)
	return a, nil
}

// CreateAgent returns *domain.DuplicateError carrying the existing agent's id
// when the account already has an agent with the same name key
// (domain.NameKey). Concurrent creates of one name: exactly one wins.
func (s *Store) CreateAgent(ctx context.Context, a domain.Agent) error {
	nameKey := domain.NameKey(a.Name)
	err := s.inTx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO agents (id, account_id, name, name_key, instructions, enabled, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			a.ID, a.AccountID, a.Name, nameKey, a.Instructions, a.Enabled, toMS(a.CreatedAt), toMS(a.UpdatedAt))
		if err != nil {
			return fmt.Errorf("insert agent: %w", err)
		}
		tx.agentsChanged(a.AccountID)
		a.CreatedAt, a.UpdatedAt = msTime(a.CreatedAt), msTime(a.UpdatedAt)
		return tx.recordAgent(ctx, a, domain.EventAgentCreated, nil)
	})
	if isUnique(err) {
		return s.duplicateAgent(ctx, a.AccountID, nameKey, a.ID)
	}
	return err
}

// duplicateAgent builds the DuplicateError of a unique violation on agents.
// It runs after the transaction rolled back (a failed statement aborts a
// PostgreSQL transaction), when the winner of the name has committed: the
// unique index made the loser wait for it.
func (s *Store) duplicateAgent(ctx context.Context, accountID, nameKey, id string) error {
	var existing string
	err := s.r.QueryRowContext(ctx, `SELECT id FROM agents WHERE account_id = $1 AND name_key = $2`,
		accountID, nameKey).Scan(&existing)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		existing = id // the id itself collided
	case err != nil:
		return fmt.Errorf("find duplicate agent: %w", err)
	}
	return &domain.DuplicateError{ExistingID: existing}
}

// GetAgent returns ErrNotFound unless the agent exists in accountID.
func (s *Store) GetAgent(ctx context.Context, accountID, id string) (domain.Agent, error) {
	if !storable(accountID, id) {
		return domain.Agent{}, domain.ErrNotFound
	}
	a, err := scanAgent(s.r.QueryRowContext(ctx,
		`SELECT `+agentColumns+` FROM agents WHERE id = $1 AND account_id = $2`, id, accountID))
	return a, rowErr("get agent", err)
}

// AgentQuery selects one keyset page of an account's agents.
type AgentQuery struct {
	AccountID string
	// OnlyKeyID, when set, keeps only agents the key is restricted to.
	OnlyKeyID string
	// UpdatedSince, when set, keeps agents with updated_at >= it.
	UpdatedSince *time.Time
	// After, when AfterID is set, starts strictly after (AfterCreatedAt, AfterID).
	AfterCreatedAt time.Time
	AfterID        string
	Limit          int
}

// AgentItem is an agent as a list shows it: the contract's four list
// fields. created_at and id are also the keyset cursor.
type AgentItem struct {
	ID        string
	Name      string
	Enabled   bool
	CreatedAt time.Time
}

// agentItemColumns are AgentItem's columns. Reading 4 columns instead of
// agentColumns' 7 matters: modernc's SQLite driver takes the connection's
// mutex for every column value, and instructions can be long.
const agentItemColumns = `id, name, enabled, created_at`

// ListAgentItems returns up to q.Limit agents ordered by (created_at, id),
// as a list item shows them, for GET /ai-agents. A Limit of 0 or less
// returns them all.
func (s *Store) ListAgentItems(ctx context.Context, q AgentQuery) ([]AgentItem, error) {
	query, args := listAgentsSQL(agentItemColumns, q)
	rows, err := s.queryRead(ctx, query, args...)
	return collect("list agents", rows, err, func(r *sql.Rows) (AgentItem, error) {
		var a AgentItem
		var created int64
		err := r.Scan(&a.ID, &a.Name, &a.Enabled, &created)
		a.CreatedAt = fromMS(created)
		return a, err
	})
}

// UpdateAgent reads the agent inside a transaction, lets fn change it, and
// writes it back when fn reports a change. ErrNotFound unless it exists in
// accountID; *domain.DuplicateError when a new name collides.
//
// fn runs inside the transaction, holding the agent's row (and on SQLite
// the writer): it must be quick and must not write through the store.
func (s *Store) UpdateAgent(ctx context.Context, accountID, id string, fn func(*domain.Agent) (changed bool, err error)) (domain.Agent, error) {
	if !storable(accountID, id) {
		return domain.Agent{}, domain.ErrNotFound
	}
	var (
		out     domain.Agent
		nameKey string
	)
	err := s.inTx(ctx, func(tx *Tx) error {
		a, err := scanAgent(tx.QueryRowContext(ctx,
			`SELECT `+agentColumns+` FROM agents WHERE id = $1 AND account_id = $2`+s.d.forUpdate, id, accountID))
		if err != nil {
			return rowErr("get agent", err)
		}
		before := a
		created, oldName := a.CreatedAt, a.Name
		changed, err := fn(&a)
		if err != nil {
			return err
		}
		// What identifies the agent is not fn's to change.
		a.ID, a.AccountID, a.CreatedAt = id, accountID, created
		if !changed {
			out = a
			return nil
		}
		a.UpdatedAt = msTime(a.UpdatedAt)
		if a.Name != oldName {
			nameKey = domain.NameKey(a.Name)
			_, err = tx.ExecContext(ctx,
				`UPDATE agents SET name = $1, name_key = $2, instructions = $3, enabled = $4, updated_at = $5
				WHERE id = $6`,
				a.Name, nameKey, a.Instructions, a.Enabled, toMS(a.UpdatedAt), id)
		} else {
			// The stored key stays: an agent refoldAgentNames found
			// colliding keeps its own and can still change otherwise.
			_, err = tx.ExecContext(ctx,
				`UPDATE agents SET instructions = $1, enabled = $2, updated_at = $3 WHERE id = $4`,
				a.Instructions, a.Enabled, toMS(a.UpdatedAt), id)
		}
		if err != nil {
			return fmt.Errorf("update agent: %w", err)
		}
		tx.agentsChanged(accountID)
		out = a
		typ, prev, err := agentEventType(before, a)
		if err != nil || typ == domain.EventAgentUpdated && prev == nil {
			return err // nothing the API shows changed: no event
		}
		return tx.recordAgent(ctx, a, typ, prev)
	})
	if isUnique(err) {
		return domain.Agent{}, s.duplicateAgent(ctx, accountID, nameKey, id)
	}
	if err != nil {
		return domain.Agent{}, err
	}
	return out, nil
}

// refoldAgentNames is a migration: it recomputes every agent's name_key
// with domain.NameKey, after that function went from lower-casing to
// Unicode full case folding with normalisation (Release 1.1). Names that did
// not collide before may collide now (ΟΔΟΣ and οδος). Both agents stay as
// they are, names included: per account, the oldest (created_at, id) of the
// names sharing a key holds that key, so a new agent or a rename to any of
// those names is refused with its id; each later one gets collidedNameKey,
// which nothing else can have, and keeps it until it is renamed.
func refoldAgentNames(ctx context.Context, tx *sql.Tx, _ string) error {
	type change struct{ id, key string }
	var (
		changes []change
		account string
		held    = map[string]bool{} // the keys of account's agents so far
	)
	rows, err := tx.QueryContext(ctx,
		`SELECT id, account_id, name, name_key FROM agents ORDER BY account_id, created_at, id`)
	_, err = collect("read agent names", rows, err, func(r *sql.Rows) (struct{}, error) {
		var id, acct, name, old string
		if err := r.Scan(&id, &acct, &name, &old); err != nil {
			return struct{}{}, err
		}
		if acct != account {
			account = acct
			clear(held)
		}
		key := domain.NameKey(name)
		if held[key] {
			key = collidedNameKey(key, id)
		}
		held[key] = true
		if key != old {
			changes = append(changes, change{id, key})
		}
		return struct{}{}, nil
	})
	if err != nil {
		return err
	}
	// Two passes: moving an agent straight to its new key could meet, in
	// the unique index, another agent's old key that has yet to move.
	for pass := range 2 {
		for _, c := range changes {
			key := c.key
			if pass == 0 {
				key = collidedNameKey("", c.id)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE agents SET name_key = $1 WHERE id = $2`, key, c.id); err != nil {
				return fmt.Errorf("update agent %s name key: %w", c.id, err)
			}
		}
	}
	return nil
}

// collidedNameKey is the name_key of an agent whose name collides with an
// older agent's in the same account (see refoldAgentNames): its key and
// its id, joined by U+001F, a control character no name contains, so that
// it can be neither any name's key nor another agent's.
func collidedNameKey(key, id string) string { return key + "\x1f" + id }

// listAgentsSQL builds ListAgentItems' statement (and the tests'
// ListAgents'), reading cols: every filter is a condition
// on top of a range scan of agents_page (account_id, created_at, id), which
// also yields the order, so a page costs its length and never an OFFSET.
func listAgentsSQL(cols string, q AgentQuery) (string, []any) {
	var b builder
	b.add(`SELECT ` + cols + ` FROM agents WHERE account_id = ` + b.arg(q.AccountID))
	if q.UpdatedSince != nil {
		b.add(` AND updated_at >= ` + b.arg(toMS(*q.UpdatedSince)))
	}
	if q.OnlyKeyID != "" {
		b.add(` AND id IN (SELECT agent_id FROM api_key_agents WHERE key_id = ` + b.arg(q.OnlyKeyID) + `)`)
	}
	if q.AfterID != "" {
		// A row-value comparison: both engines turn it into a range scan
		// of agents_page.
		b.add(` AND (created_at, id) > (` + b.arg(toMS(q.AfterCreatedAt)) + `, ` + b.arg(q.AfterID) + `)`)
	}
	b.add(` ORDER BY created_at, id`)
	if q.Limit > 0 {
		b.add(` LIMIT ` + b.arg(q.Limit))
	}
	return b.b.String(), b.args
}

// ImportAgents inserts many agents at once, in batches of multi-row
// inserts, one transaction per batch (bulk loads and benchmarks), which
// record no events. Names must
// already be unique per account; a collision fails its batch with
// *domain.DuplicateError and leaves earlier batches in place.
func (s *Store) ImportAgents(ctx context.Context, agents []domain.Agent) error {
	for chunk := range slices.Chunk(agents, 500) {
		var b strings.Builder
		b.WriteString(`INSERT INTO agents (id, account_id, name, name_key, instructions, enabled, created_at, updated_at) VALUES `)
		args := make([]any, 0, len(chunk)*8)
		for i, a := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&b, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
			args = append(args, a.ID, a.AccountID, a.Name, domain.NameKey(a.Name), a.Instructions, a.Enabled,
				toMS(a.CreatedAt), toMS(a.UpdatedAt))
		}
		err := s.inTx(ctx, func(tx *Tx) error {
			for _, a := range chunk {
				tx.agentsChanged(a.AccountID)
			}
			_, err := tx.ExecContext(ctx, b.String(), args...)
			return err
		})
		if isUnique(err) {
			return &domain.DuplicateError{}
		}
		if err != nil {
			return fmt.Errorf("import agents: %w", err)
		}
	}
	return nil
}
