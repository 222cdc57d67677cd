package usage

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// batchStore keeps every batch of counts it is given, or fails.
type batchStore struct {
	mu      sync.Mutex
	fail    bool
	batches [][]store.UsageCount
}

func (b *batchStore) WritePackedUsage(_ context.Context, _ *requestlog.Buffer, counts []store.UsageCount) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail {
		return errors.New("store away")
	}
	b.batches = append(b.batches, slices.Clone(counts))
	return nil
}

func (*batchStore) SweepUsage(context.Context, time.Time) error { return nil }

// Record counts each request's latency in its bin beside its count, and
// each request to an AI agent's routes per agent (not a 404: made-up ids
// do not count); a failed flush keeps both for the next.
func TestRecordLatencyAndAgents(t *testing.T) {
	st := &batchStore{fail: true}
	r := New(st, nil, Options{})
	rec := func(route, path string, status int, d time.Duration) {
		r.Record(requestlog.Log{ID: "req", AccountID: "acc", KeyID: "key", At: t0, Route: route, Path: path, Status: status, Duration: d})
	}
	rec("GET /v1/me", "/v1/me", 200, 2*time.Millisecond)
	rec("GET /v1/me", "/v1/me", 200, 2*time.Millisecond)
	rec("GET /v1/ai-agents/{agent_id}", "/v1/ai-agents/agt_1", 200, 40*time.Millisecond)
	rec("POST /v1/ai-agents/{agent_id}/questions", "/v1/ai-agents/agt_1/questions", 429, time.Second)
	rec("GET /v1/ai-agents/{agent_id}", "/v1/ai-agents/agt_made_up", 404, time.Millisecond)
	rec("GET /v1/ai-agents", "/v1/ai-agents", 200, time.Millisecond)
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("the failing store took the batch")
	}
	st.fail = false
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(st.batches) != 1 {
		t.Fatalf("%d batches written, want 1", len(st.batches))
	}
	lat := make([]int64, requestlog.LatencyBins)
	agents := map[string]int64{}
	var n int64
	for _, c := range st.batches[0] {
		if c.AgentID != "" {
			agents[c.AgentID+" "+c.Class] += c.Count
			if c.KeyID != "" || c.Latency != nil {
				t.Errorf("an agent's count %+v has a key or a histogram", c)
			}
			continue
		}
		n += c.Count
		for b, k := range c.Latency {
			lat[b] += int64(k)
		}
	}
	if n != 6 || len(agents) != 2 || agents["agt_1 2xx"] != 1 || agents["agt_1 429"] != 1 {
		t.Errorf("%d key requests (want 6), agents %v (want agt_1: one 2xx, one 429)", n, agents)
	}
	want := make([]int64, requestlog.LatencyBins)
	for _, d := range []time.Duration{2, 2, 40, 1000, 1, 1} {
		want[requestlog.LatencyBin(d*time.Millisecond)]++
	}
	if !slices.Equal(lat, want) {
		t.Errorf("latency bins %v, want %v", lat, want)
	}
}
