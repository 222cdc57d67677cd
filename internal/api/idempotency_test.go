package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

func withKey(k string) []string { return []string{"Idempotency-Key: " + k} }

func TestIdempotencyKeyOnCreate(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		post := func(idem, body string) *response {
			return f.do(req{method: "POST", path: "/v1/ai-agents", key: key, body: body, headers: withKey(idem)})
		}
		for _, bad := range []string{"", strings.Repeat("k", 256), "caf\u00e9", "a\x7fb"} {
			post(bad, `{"name":"x"}`).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
		}
		f.do(req{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"x"}`,
			headers: []string{"Idempotency-Key: a", "Idempotency-Key: +b"}}).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")

		first := post("k1", `{"name":"Helpdesk"}`)
		first.wantStatus(t, 201)
		again := post("k1", `{"name":"Helpdesk"}`)
		again.wantStatus(t, 201)
		if again.Body.String() != first.Body.String() || again.Header().Get("Location") != first.Header().Get("Location") ||
			again.Header().Get("Idempotent-Replayed") != "true" || first.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("replay %d %q %v, first %q %v", again.Code, again.Body, again.Header(), first.Body, first.Header())
		}
		// Fresh rate-limit headers: the replay counted.
		r1, _ := strconv.Atoi(first.Header().Get("X-RateLimit-Remaining"))
		r2, _ := strconv.Atoi(again.Header().Get("X-RateLimit-Remaining"))
		if r2 != r1-1 {
			t.Fatalf("remaining %d then %d", r1, r2)
		}
		post("k1", `{"name":"Helpdesk2"}`).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
		f.do(req{method: "POST", path: "/v1/ai-agents/" + first.data()["id"].(string) + "/questions", key: key,
			body: `{"name":"Helpdesk"}`, headers: withKey("k1")}).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
		// Keys are per account.
		other, owner := f.newAccount("Other")
		otherKey := f.keyIn(other, owner, nil, allAgentScopes...).Credential
		f.do(req{method: "POST", path: "/v1/ai-agents", key: otherKey, body: `{"name":"Helpdesk"}`, headers: withKey("k1")}).wantStatus(t, 201)

		// A validation 400 is not saved: the key runs again.
		post("k2", `{}`).wantError(t, 400, domain.CodeMissingField, "name:missing_field")
		if r := post("k2", `{}`); r.Header().Get("Idempotent-Replayed") != "" {
			t.Fatal("a 400 was replayed")
		}
		post("k2", `{"name":"Second"}`).wantStatus(t, 201)
		// A 409 is saved and replayed.
		post("k3", `{"name":"Second"}`).wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
		if r := post("k3", `{"name":"Second"}`); r.Code != 409 || r.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("409 replay: %d %v", r.Code, r.Header())
		}
		// Without a key, nothing changes: a second create is a duplicate.
		f.send("POST", "/v1/ai-agents", key, `{"name":"Helpdesk"}`).wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
		if n := len(f.get("/v1/ai-agents", key).body["data"].([]any)); n != 2 {
			t.Fatalf("%d agents, want 2", n)
		}
	})
}

// TestIdempotencyAcrossInstances asks one question with one key through
// two servers on one database at once: the model is asked once, every
// answer is that question's (201, replayed or not) or 409 in progress, and
// once the first is done every retry is the replay.
func TestIdempotencyAcrossInstances(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		dsn := filepath.Join(t.TempDir(), "agentapi.db")
		if engine == store.EnginePostgres {
			dsn = storetest.PostgresURL(t)
		}
		// Two stores on one database: two instances.
		st1, st2 := openStore(t, dsn), openStore(t, dsn)
		release := make(chan struct{})
		opt, peer := withModel(t, func(llmtest.Request) (int, string) {
			<-release
			return 200, llmtest.Answer("forty-two")
		})
		f1 := newFixtureOn(t, st1, opt)
		f2 := newFixtureOn(t, st2, opt)
		ctx := context.Background()
		if err := f1.st.SetAccountFeature(ctx, f1.account.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
		key := f1.key(allAgentScopes...)
		id := f1.createAgent(key, "Oracle")
		ask := func(f *fixture) *response {
			return f.do(req{method: "POST", path: "/v1/ai-agents/" + id + "/questions", key: key,
				body: `{"question":"The answer?"}`, headers: withKey("q-1")})
		}
		codes := idempotencyAcrossAskAtOnce(t, ask, f1, f2, release, peer)
		if codes[201] != 1 || codes[409] != 7 {
			t.Fatalf("status counts %v", codes)
		}
		idempotencyAcrossWantReplays(t, ask, f1, f2)
		if n := len(peer.Requests()); n != 1 {
			t.Fatalf("the model was asked %d times", n)
		}
	})
}

// idempotencyAcrossAskAtOnce asks 8 times at once, alternating between f1
// and f2, while the model is held until release; it returns the count of
// each status.
func idempotencyAcrossAskAtOnce(t *testing.T, ask func(*fixture) *response, f1, f2 *fixture, release chan struct{}, peer *llmtest.Server) map[int]int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[int]int{}
		done  = make(chan struct{}, 8)
	)
	for i := range 8 {
		wg.Go(func() {
			r := ask([]*fixture{f1, f2}[i%2])
			mu.Lock()
			codes[r.Code]++
			mu.Unlock()
			done <- struct{}{}
		})
	}
	// The winner waits on the model until the seven others are
	// answered: each of them while it is still running (409).
	for range 7 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			close(release)
			t.Fatalf("answers while the first runs: %v; the model was asked %d times", codes, len(peer.Requests()))
		}
	}
	close(release)
	wg.Wait()
	return codes
}

// idempotencyAcrossWantReplays retries on each instance and wants the
// replay of the first answer.
func idempotencyAcrossWantReplays(t *testing.T, ask func(*fixture) *response, fs ...*fixture) {
	t.Helper()
	for _, f := range fs {
		r := ask(f)
		if r.Code != 201 || r.Header().Get("Idempotent-Replayed") != "true" || r.data()["answer"] != "forty-two" {
			t.Fatalf("retry: %d %v %s", r.Code, r.Header(), r.Body)
		}
	}
}

// TestIdempotencyLeaseTakeover: a request whose reservation outlives
// IdempotencyLease (its instance stalled or died) loses the key. Until the
// lease ends a retry is 409; from then on the retry runs and its answer is
// the one kept: the stalled request's late answer does not replace it.
func TestIdempotencyLeaseTakeover(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		var asked sync.Mutex
		calls := 0
		started, release := make(chan struct{}), make(chan struct{})
		opt, peer := withModel(t, func(llmtest.Request) (int, string) {
			asked.Lock()
			calls++
			n := calls
			asked.Unlock()
			if n == 1 {
				close(started)
				<-release
				return 200, llmtest.Answer("stalled")
			}
			return 200, llmtest.Answer("retried")
		})
		f := newFixture(t, engine, opt)
		if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
		key := f.key(allAgentScopes...)
		id := f.createAgent(key, "Oracle")
		ask := func() *response {
			return f.do(req{method: "POST", path: "/v1/ai-agents/" + id + "/questions", key: key,
				body: `{"question":"The answer?"}`, headers: withKey("lease")})
		}
		first := make(chan *response, 1)
		go func() { first <- ask() }()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the first request never reached the model")
		}
		f.clock.Advance(IdempotencyLease - time.Millisecond)
		ask().wantError(t, 409, domain.CodeInconsistentState)
		f.clock.Advance(time.Millisecond)
		retry := ask()
		close(release)
		if retry.Code != 201 || retry.Header().Get("Idempotent-Replayed") != "" || retry.data()["answer"] != "retried" {
			t.Fatalf("retry once the lease ended: %d %v %s", retry.Code, retry.Header(), retry.Body)
		}
		if r := <-first; r.Code != 201 || r.data()["answer"] != "stalled" {
			t.Fatalf("the stalled request: %d %s", r.Code, r.Body)
		}
		again := ask()
		if again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != retry.Body.String() {
			t.Fatalf("replay %d %v %s, want the retry's %s", again.Code, again.Header(), again.Body, retry.Body)
		}
		if n := len(peer.Requests()); n != 2 {
			t.Fatalf("the model was asked %d times, want 2", n)
		}
	})
}

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestIdempotencyQuestionOutcomes: what a question's key keeps. A 5xx, a
// 403 and a 429 are not saved (the same key runs again and reaches the
// model); a 201 and a 404 are, and replay without asking the model.
func TestIdempotencyQuestionOutcomes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		var (
			mu   sync.Mutex
			fail = true
		)
		opt, peer := withModel(t, func(r llmtest.Request) (int, string) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return 500, `{"error":{"message":"down"}}`
			}
			return 200, llmtest.Answer("forty-two")
		})
		f := newFixture(t, engine, opt)
		admin := f.key(allAgentScopes...)
		id := f.createAgent(admin, "Oracle")
		path := "/v1/ai-agents/" + id + "/questions"
		ask := func(key, idem, body string) *response {
			return f.do(req{method: "POST", path: path, key: key, body: body, headers: withKey(idem)})
		}
		const q = `{"question":"The answer?"}`

		// 403: the feature is off; once on, the same key runs.
		ask(admin, "q", q).wantError(t, 403, domain.CodeFeatureNotEnabled)
		if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
		// 500: the model failed; the same key asks it again.
		ask(admin, "q", q).wantError(t, 500, domain.CodeServerError)
		mu.Lock()
		fail = false
		mu.Unlock()
		idempotencyOutcomesWantAnswerSaved(t, func() *response { return ask(admin, "q", q) })
		if n := len(peer.Requests()); n != 2 {
			t.Fatalf("the model was asked %d times, want 2 (the 500, then the 201)", n)
		}

		// 404: an unknown conversation is saved and replayed.
		unknown := `{"question":"x","conversation_id":"conv_00000000000000000000000000"}`
		ask(admin, "c", unknown).wantError(t, 404, domain.CodeNotFound)
		if r := ask(admin, "c", unknown); r.Code != 404 || r.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("404 replay %d %v", r.Code, r.Header())
		}

		// 429: refused before the key is looked at; the same key runs
		// once the window turns.
		limited := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1 }, allAgentScopes...).Credential
		f.get("/v1/me", limited).wantStatus(t, 200)
		ask(limited, "l", q).wantError(t, 429, domain.CodeRateLimitExceeded)
		f.clock.Advance(time.Minute)
		if r := ask(limited, "l", q); r.Code != 201 || r.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("after a 429: %d %v %s", r.Code, r.Header(), r.Body)
		}
		if n := len(peer.Requests()); n != 3 {
			t.Fatalf("the model was asked %d times, want 3", n)
		}
	})
}

// idempotencyOutcomesWantAnswerSaved asks once the model answers again:
// the answer is new, and asking again replays it.
func idempotencyOutcomesWantAnswerSaved(t *testing.T, ask func() *response) {
	t.Helper()
	first := ask()
	first.wantStatus(t, 201)
	if first.Header().Get("Idempotent-Replayed") != "" || first.data()["answer"] != "forty-two" {
		t.Fatalf("after a 500: %v %s", first.Header(), first.Body)
	}
	again := ask()
	if again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("replay %d %v %s", again.Code, again.Header(), again.Body)
	}
}

// streamAsk posts a question with an Idempotency-Key to sf's server and
// returns the response with its whole body.
func streamAsk(t *testing.T, sf *streamFixture, idem, body string) (*http.Response, string) {
	t.Helper()
	hr, err := http.NewRequest("POST", sf.srv.URL+"/v1/ai-agents/"+sf.agent+"/questions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+sf.key)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", idem)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestIdempotencyStreamedReplay: a streamed question repeated with its key
// gets the saved answer as question.created, one answer.delta and
// answer.completed, without a second model call. The same key on the
// question without "stream" (or the other way round) is another body: 400.
func TestIdempotencyStreamedReplay(t *testing.T) {
	sf := newStreamFixture(t, time.Hour, llmtest.Echo)
	const streamed = `{"question":"What is 2+2?","stream":true}`
	resp, first := streamAsk(t, sf, "s-1", streamed)
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v", resp.StatusCode, resp.Header)
	}
	firstEvents := readEvents(t, first)
	if len(firstEvents) < 3 || firstEvents[len(firstEvents)-1].name != "answer.completed" {
		t.Fatalf("first stream %q", first)
	}
	resp, replay := streamAsk(t, sf, "s-1", streamed)
	if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" ||
		resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	evs := readEvents(t, replay)
	if len(evs) != 3 || evs[0] != firstEvents[0] || evs[1].name != "answer.delta" ||
		evs[1].data != `{"delta":"echo: What is 2+2?"}` || evs[2] != firstEvents[len(firstEvents)-1] {
		t.Fatalf("replayed events %+v\nfirst %+v", evs, firstEvents)
	}
	if n := len(sf.peer.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times", n)
	}
	path := "/v1/ai-agents/" + sf.agent + "/questions"
	sf.do(req{method: "POST", path: path, key: sf.key, body: `{"question":"What is 2+2?"}`, headers: withKey("s-1")}).
		wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
	sf.do(req{method: "POST", path: path, key: sf.key, body: `{"question":"Plain?"}`, headers: withKey("p-1")}).wantStatus(t, 201)
	resp, body := streamAsk(t, sf, "p-1", `{"question":"Plain?","stream":true}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"field":"Idempotency-Key"`) {
		t.Fatalf("streamed repeat of a plain question: %d %s", resp.StatusCode, body)
	}
}

// readEvents splits a whole event stream into its events (comments skipped).
func readEvents(t *testing.T, stream string) []sseEvent {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(stream))
	var evs []sseEvent
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return evs
		}
		if ev := nextEvent(t, br); ev.name != "" {
			evs = append(evs, ev)
		}
	}
}

// TestIdempotencyReplayAfterRestriction: a key restricted to one agent
// that sends another key's Idempotency-Key and body gets its own refusal
// (403), never the saved response, which may name agents outside its list.
func TestIdempotencyReplayAfterRestriction(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		full := f.key(allAgentScopes...)
		mine := f.createAgent(full, "Mine")
		f.createAgent(full, "Taken")
		restricted := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{mine} }, allAgentScopes...).Credential
		for _, c := range []struct{ idem, body string }{
			{"created", `{"name":"Theirs"}`}, // saved 201 with another agent's record
			{"taken", `{"name":"Taken"}`},    // saved 409 with existing_id outside the list
		} {
			f.do(req{method: "POST", path: "/v1/ai-agents", key: full, body: c.body, headers: withKey(c.idem)})
			r := f.do(req{method: "POST", path: "/v1/ai-agents", key: restricted, body: c.body, headers: withKey(c.idem)})
			r.wantError(t, 403, domain.CodeAccessDenied)
			if r.Header().Get("Idempotent-Replayed") != "" || strings.Contains(r.Body.String(), "agt_") {
				t.Fatalf("%s: the restricted key learned of the saved response: %v %s", c.idem, r.Header(), r.Body)
			}
			// Another body under the same key: still its own refusal, not
			// 400 "used with another request".
			f.do(req{method: "POST", path: "/v1/ai-agents", key: restricted, body: `{"name":"Other"}`, headers: withKey(c.idem)}).
				wantError(t, 403, domain.CodeAccessDenied)
		}
	})
}
