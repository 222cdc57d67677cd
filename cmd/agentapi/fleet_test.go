package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestServeWithRedisMarksTheStore: serve --redis records that its
// instances keep the key epoch's mirror; serve without it does not.
func TestServeWithRedisMarksTheStore(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	db := filepath.Join(t.TempDir(), "fleet.db")
	_, _, stop := startStoppable(t, "--db", db)
	stop()
	if mirroredStore(t, db) {
		t.Fatal("serve without --redis marked the store")
	}
	_, _, stop = startStoppable(t, "--db", db, "--redis", redisURL)
	stop()
	if !mirroredStore(t, db) {
		t.Fatal("serve --redis did not mark the store")
	}
}

func mirroredStore(t *testing.T, db string) bool {
	t.Helper()
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	on, err := st.KeyEpochMirrored(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return on
}

// TestFleetCommandsNeedRedis: on a store whose instances keep the mirror,
// every command that changes what a key may do refuses (exit 2) without
// --redis, naming it and AGENTAPI_REDIS_URL; --no-redis runs it and says
// the instances may accept the key as it was for up to a second.
func TestFleetCommandsNeedRedis(t *testing.T) {
	for _, engine := range storetest.Engines() {
		t.Run(engine, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "fleet.db")
			if engine == store.EnginePostgres {
				db = storetest.PostgresURL(t)
			}
			fleetRefusals(t, db)
		})
	}
}

func fleetRefusals(t *testing.T, db string) {
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	keys := 0
	newKey := func() string {
		keys++
		out := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k"+strconv.Itoa(keys), "--preset", "full-access", "--json")
		return strings.SplitN(strings.SplitN(out, `"id":"`, 2)[1], `"`, 2)[0]
	}
	key := newKey()
	commands := [][]string{
		{"key", "set-rate-limit", key, "50"},
		{"account", "deactivate", acct},
		{"account", "activate", acct},
		{"key", "revoke", "--account", acct, "--as", "ann@example.com", key},
	}
	// Before any serve --redis: no refusal.
	mustCLI(t, db, "", commands[0]...)
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkKeyEpochMirrored(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, c := range commands {
		out, errs, code := cli(t, db, "", c...)
		if code != 2 || out != "" || !strings.Contains(errs, "--redis") || !strings.Contains(errs, "AGENTAPI_REDIS_URL") || !strings.Contains(errs, "--no-redis") {
			t.Fatalf("%v without --redis: exit %d, %q %q", c, code, out, errs)
		}
	}
	for _, c := range commands {
		c = append([]string{c[0], c[1], "--no-redis"}, c[2:]...)
		out, errs, code := cli(t, db, "", c...)
		if code != 0 || out == "" || !strings.Contains(errs, "may accept the key as it was for up to 1s") {
			t.Fatalf("%v: exit %d, %q %q", c, code, out, errs)
		}
	}
	// Creating a key changes no key: it needs no Redis.
	newKey()
}
