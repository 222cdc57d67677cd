package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// listInstance is one serve instance on a shared PostgreSQL database and
// Redis, wired as serve wires it: the key epoch's mirror, the agent-list
// versions, the Redis limiter.
type listInstance struct {
	f     *fixture
	st    *store.Store
	fresh *fresh.Tracker
	lists *agents.ListCache
}

func newListInstance(t *testing.T, dsn string, redisOpts *redis.Options) *listInstance {
	t.Helper()
	m := storetest.OpenMirrored(t, dsn, redisOpts)
	in := &listInstance{st: m.Store, fresh: m.Fresh, lists: agents.NewListCache()}
	in.f = newFixtureOn(t, m.Store, func(c *Config) {
		c.Limiter = m.Limiter
		c.Fresh = m.Fresh
		c.ListCache = in.lists
	})
	return in
}

// names lists the account's agents through in, by id.
func (in *listInstance) names(t *testing.T, key string) map[string]string {
	t.Helper()
	r := in.f.get("/v1/ai-agents?limit=100", key)
	r.wantStatus(t, 200)
	out := map[string]string{}
	for _, it := range r.body["data"].([]any) {
		a := it.(map[string]any)
		out[a["id"].(string)] = fmt.Sprintf("%v/%v", a["name"], a["enabled"])
	}
	return out
}

// TestAgentListFromMemoryAcrossInstances: on PostgreSQL with Redis, a page
// of agents is answered from memory while the account's agents are
// unchanged (no database read), and a change made through any instance, or
// through the store directly as the console and the operator commands do,
// is in the very next page on every instance, over hundreds of trials.
func TestAgentListFromMemoryAcrossInstances(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	a, b := newListInstance(t, dsn, opts), newListInstance(t, dsn, opts)
	key := a.f.keyIn(a.f.account, a.f.owner, func(p *keys.CreateParams) { p.RateLimit = 100_000 }, allAgentScopes...).Credential
	// A third writer: the agents service on a store of its own, as the
	// console (same process as an API, other handler) or a script would.
	side := newListInstance(t, dsn, opts)
	sideSvc := agents.New(side.st, time.Now)
	actor := agents.Actor{AccountID: a.f.account.ID}

	type agent = listedAgent
	ids := []string{a.f.createAgent(key, "first"), b.f.createAgent(key, "second")}
	want := map[string]agent{ids[0]: {"first", true}, ids[1]: {"second", true}}
	check := func(trial int, when string) {
		t.Helper()
		wantListedOnEach(t, fmt.Sprintf("trial %d, %s", trial, when), key, want, a, b)
	}
	const trials = 300
	for trial := range trials {
		check(trial, "before the change")
		check(trial, "unchanged") // from memory, by now
		id := ids[trial%len(ids)]
		ag := want[id]
		name := fmt.Sprintf("agent %d", trial)
		switch trial % 4 {
		case 0:
			a.f.send("PATCH", "/v1/ai-agents/"+id, key, `{"name":"`+name+`"}`).wantStatus(t, 200)
			ag.name = name
		case 1:
			ag.enabled = !ag.enabled
			b.f.send("PUT", "/v1/ai-agents/"+id+"/enabled", key, fmt.Sprintf(`{"enabled":%v}`, ag.enabled)).wantStatus(t, 200)
		case 2:
			if _, err := sideSvc.Update(context.Background(), actor, id, agents.Fields{Name: &name}); err != nil {
				t.Fatal(err)
			}
			ag.name = name
		case 3:
			if len(ids) < 60 {
				id = b.f.createAgent(key, name)
				ids = append(ids, id)
				ag = agent{name, true}
			}
		}
		want[id] = ag
		check(trial, "after the change")
	}
	for i, in := range []*listInstance{a, b} {
		s := in.lists.Stats()
		// Two of every instance's four reads per trial find the page
		// unchanged since its previous read.
		if s.Hits < trials/2 {
			t.Fatalf("instance %d answered %d pages from memory (%d read): the cache is not used", i, s.Hits, s.Misses)
		}
	}
	if f := a.fresh.ListFailures() + b.fresh.ListFailures() + side.fresh.ListFailures(); f != 0 {
		t.Fatalf("%d versions not set", f)
	}
}

type listedAgent struct {
	name    string
	enabled bool
}

// wantListedOnEach: every instance lists exactly want through key.
func wantListedOnEach(t *testing.T, step, key string, want map[string]listedAgent, instances ...*listInstance) {
	t.Helper()
	w := map[string]string{}
	for id, ag := range want {
		w[id] = fmt.Sprintf("%s/%v", ag.name, ag.enabled)
	}
	for i, in := range instances {
		if got := in.names(t, key); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s, instance %d: %v, want %v", step, i, got, w)
		}
	}
}

// TestAgentListStaleAtMostABoundWhenTheVersionCannotBeSet: a writer that
// cannot reach Redis keeps its change (and counts the failure); another
// instance may serve the page it holds for at most fresh.ListStaleBound,
// then reads the change.
func TestAgentListStaleAtMostABoundWhenTheVersionCannotBeSet(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	a := newListInstance(t, dsn, opts)
	key := a.f.key(allAgentScopes...)
	id := a.f.createAgent(key, "before")

	cut := *opts
	proxy := testenv.NewProxy(t, opts.Addr)
	cut.Addr, cut.MaxRetries = proxy.Addr(), 0
	writer := newListInstance(t, dsn, &cut)
	proxy.Cut()

	if got := a.names(t, key)[id]; got != "before/true" {
		t.Fatalf("before: %q", got)
	}
	name := "after"
	if _, err := agents.New(writer.st, time.Now).Update(context.Background(), agents.Actor{AccountID: a.f.account.ID}, id, agents.Fields{Name: &name}); err != nil {
		t.Fatalf("the change must be kept when Redis is away: %v", err)
	}
	changed := time.Now()
	if writer.fresh.ListFailures() != 1 {
		t.Fatalf("%d failures counted, want 1", writer.fresh.ListFailures())
	}
	for a.names(t, key)[id] != "after/true" {
		if time.Since(changed) > fresh.ListStaleBound+500*time.Millisecond {
			t.Fatalf("the page was still stale %v after the change", time.Since(changed))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAgentListUnderARestrictedKey: pages are held per query, so a key
// restricted to some agents never sees a page read for the whole account.
func TestAgentListUnderARestrictedKey(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	a := newListInstance(t, dsn, opts)
	full := a.f.key(allAgentScopes...)
	one := a.f.createAgent(full, "one")
	a.f.createAgent(full, "two")
	restricted := a.f.keyIn(a.f.account, a.f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{one} }, domain.ScopeAgentsRead).Credential
	for range 3 {
		if n := len(a.names(t, full)); n != 2 {
			t.Fatalf("full key: %d agents", n)
		}
		if got := a.names(t, restricted); len(got) != 1 || got[one] == "" {
			t.Fatalf("restricted key: %v", got)
		}
	}
}
