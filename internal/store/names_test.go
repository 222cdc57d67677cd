package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestAgentNamesUniqueUnderCaseFolding: names collide after normalisation
// and full case folding (docs/api.md, Names), and the refusal names
// the agent that holds the name.
func TestAgentNamesUniqueUnderCaseFolding(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		acct := storetest.Account(t, s)
		var greek domain.Agent
		for i, pair := range [][2]string{
			{"ΟΔΟΣ", "οδος"},
			{"ſupport", "SUPPORT"},
			{"Straße", "STRASSE"},
			{"Å", "å"},
		} {
			first := storetest.Agent(t, s, acct.ID, pair[0], t0.Add(time.Duration(i)*time.Second))
			if i == 0 {
				greek = first
			}
			dup := domain.Agent{
				ID: domain.NewID(domain.PrefixAgent, t0), AccountID: acct.ID, Name: pair[1],
				Enabled: true, CreatedAt: t0, UpdatedAt: t0,
			}
			wantDuplicate(t, pair[1]+" after "+pair[0], s.CreateAgent(ctx, dup), first.ID)
		}
		// Renaming onto a folded name is refused the same way.
		other := storetest.Agent(t, s, acct.ID, "Other", t0)
		_, err := s.UpdateAgent(ctx, acct.ID, other.ID, func(a *domain.Agent) (bool, error) {
			a.Name = "Οδος"
			return true, nil
		})
		wantDuplicate(t, "rename onto a folded name", err, greek.ID)
	})
}

// agentKeys reads every agent's stored name_key, by id.
func agentKeys(t *testing.T, s *store.Store) map[string]string {
	t.Helper()
	rows, err := s.Writer().Query(`SELECT id, name_key FROM agents`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, key string
		if err := rows.Scan(&id, &key); err != nil {
			t.Fatal(err)
		}
		out[id] = key
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRefoldAgentNamesMigration opens a database as an earlier release left
// it (keys lower-cased, the migration not yet recorded) and checks what the
// migration makes of it: every key recomputed; names that now collide all
// kept, the oldest holding the name; the migration recorded and not run
// again.
func TestRefoldAgentNamesMigration(t *testing.T) {
	for _, e := range storetest.Engines() {
		t.Run(e, func(t *testing.T) {
			refoldAgentNamesOnEngine(t, e)
		})
	}
}

// refoldAgentNamesRow is an agent as an earlier release stored it.
type refoldAgentNamesRow struct {
	name, oldKey string
	acct         string
}

// refoldAgentNamesOnEngine is TestRefoldAgentNamesMigration on engine e.
func refoldAgentNamesOnEngine(t *testing.T, e string) {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "refold.db")
	if e == store.EnginePostgres {
		dsn = storetest.PostgresURL(t)
	}
	s1, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	acct, other := storetest.Account(t, s1), storetest.Account(t, s1)
	rows := refoldAgentNamesRows(acct.ID, other.ID)
	ids := refoldAgentNamesSeed(t, s1, rows)
	s2 := reopen(t, s1, dsn, 1)
	refoldAgentNamesCheckKeys(t, s2, rows, ids)
	refoldAgentNamesCheckList(t, s2, acct.ID, rows, ids)

	// The oldest holds the name: a new one, or a rename onto it,
	// is refused with its id.
	refoldAgentNamesCheckRefusals(t, s2, acct.ID, ids)
	// A later one still changes otherwise, and takes a free name.
	refoldAgentNamesCheckLaterChanges(t, s2, acct.ID, ids)
	// Recorded: a third open changes nothing.
	s3 := reopen(t, s2, dsn, 0)
	if k := agentKeys(t, s3)[ids[2]]; !strings.HasSuffix(k, ids[2]) {
		t.Fatalf("reopen changed a kept key to %+q", k)
	}
}

// refoldAgentNamesRows is the agents the earlier release left, in creation
// order.
func refoldAgentNamesRows(acctID, otherID string) []refoldAgentNamesRow {
	// In creation order. The keys are what 1.0 stored
	// (strings.ToLower), except for the last two, whose stale keys
	// are each other's new ones: moving either straight to its new
	// key would meet the other's old one in the unique index.
	return []refoldAgentNamesRow{
		{"ΟΔΟΣ", "οδοσ", acctID},
		{"οδος", "οδος", acctID},
		{"Οδος", "οδος" + "x", acctID}, // a third spelling, stale
		{"STRASSE", "strasse", acctID},
		{"Straße", "straße", acctID},
		{"plain", "plain", acctID},
		{"οδος", "οδος", otherID}, // another account: no collision
		{"Swap A", "swap b", acctID},
		{"Swap B", "swap a", acctID},
	}
}

// refoldAgentNamesSeed inserts the rows a second apart with their old keys
// and forgets the migration was run; it returns the rows' ids.
func refoldAgentNamesSeed(t *testing.T, s1 *store.Store, rows []refoldAgentNamesRow) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(rows))
	for i, r := range rows {
		at := t0.Add(time.Duration(i) * time.Second)
		ids[i] = domain.NewID(domain.PrefixAgent, at)
		if _, err := s1.Writer().ExecContext(ctx,
			`INSERT INTO agents (id, account_id, name, name_key, instructions, enabled, created_at, updated_at)
					VALUES ($1, $2, $3, $4, '', TRUE, $5, $5)`,
			ids[i], r.acct, r.name, r.oldKey, at.UnixMilli()); err != nil {
			t.Fatalf("insert %q: %v", r.name, err)
		}
	}
	if _, err := s1.Writer().ExecContext(ctx,
		`DELETE FROM schema_migrations WHERE version = '0005_refold_agent_names.go'`); err != nil {
		t.Fatal(err)
	}
	return ids
}

// refoldAgentNamesCheckKeys checks every key was recomputed, the names that
// now collide suffixed with their ids but the oldest.
func refoldAgentNamesCheckKeys(t *testing.T, s2 *store.Store, rows []refoldAgentNamesRow, ids []string) {
	t.Helper()
	keys := agentKeys(t, s2)
	want := []string{
		"οδοσ", "οδοσ\x1f" + ids[1], "οδοσ\x1f" + ids[2],
		"strasse", "strasse\x1f" + ids[4],
		"plain", "οδοσ", "swap a", "swap b",
	}
	for i, w := range want {
		if keys[ids[i]] != w {
			t.Errorf("%q (%d): key %+q, want %+q", rows[i].name, i, keys[ids[i]], w)
		}
	}
}

// refoldAgentNamesCheckList checks the account's eight agents are all kept,
// in creation order.
func refoldAgentNamesCheckList(t *testing.T, s2 *store.Store, acctID string, rows []refoldAgentNamesRow, ids []string) {
	t.Helper()
	list, err := s2.ListAgents(context.Background(), store.AgentQuery{AccountID: acctID})
	if err != nil || len(list) != 8 {
		t.Fatalf("after the migration %d agents (%v), want all 8 kept", len(list), err)
	}
	for i, a := range list {
		j := i
		if j >= 6 {
			j++ // rows[6] is in the other account
		}
		if a.ID != ids[j] || a.Name != rows[j].name {
			t.Errorf("agent %d is %s %q, want %s %q", i, a.ID, a.Name, ids[j], rows[j].name)
		}
	}
}

// refoldAgentNamesCheckRefusals checks a new agent, or a rename, onto a name
// the oldest holds is refused with the oldest's id.
func refoldAgentNamesCheckRefusals(t *testing.T, s2 *store.Store, acctID string, ids []string) {
	t.Helper()
	ctx := context.Background()
	dup := domain.Agent{ID: domain.NewID(domain.PrefixAgent, t0), AccountID: acctID, Name: "ΟΔΟς",
		Enabled: true, CreatedAt: t0, UpdatedAt: t0}
	wantDuplicate(t, "create after the migration", s2.CreateAgent(ctx, dup), ids[0])
	_, err := s2.UpdateAgent(ctx, acctID, ids[5], func(a *domain.Agent) (bool, error) {
		a.Name = "strasse"
		return true, nil
	})
	wantDuplicate(t, "rename after the migration", err, ids[3])
}

// refoldAgentNamesCheckLaterChanges checks a colliding agent that is not the
// oldest still changes otherwise, and is renamed to a free name.
func refoldAgentNamesCheckLaterChanges(t *testing.T, s2 *store.Store, acctID string, ids []string) {
	t.Helper()
	ctx := context.Background()
	got, err := s2.UpdateAgent(ctx, acctID, ids[1], func(a *domain.Agent) (bool, error) {
		a.Enabled, a.Instructions = false, "still here"
		return true, nil
	})
	if err != nil || got.Enabled || got.Name != "οδος" {
		t.Fatalf("changing a colliding agent: %+v, %v", got, err)
	}
	if _, err := s2.UpdateAgent(ctx, acctID, ids[1], func(a *domain.Agent) (bool, error) {
		a.Name = "οδος 2"
		return true, nil
	}); err != nil {
		t.Fatalf("renaming a colliding agent: %v", err)
	}
	if k := agentKeys(t, s2)[ids[1]]; k != "οδοσ 2" {
		t.Fatalf("renamed agent's key %+q", k)
	}
}
