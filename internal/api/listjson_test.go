package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

// encodeStd is what writeJSON sends for v: encoding/json's bytes.
func encodeStd(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnew\nline\rcr\bback\fform",
	"\x00\x01\x1f\x7f", "é ü 日本語 🙂", "\u2028 and \u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
	"trailing \\", "ends in \xe2\x82",
}

func FuzzAppendString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}

func TestAppendAgentPageMatchesEncodingJSON(t *testing.T) {
	next := "c_abc-_="
	created := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("x", 3600))
	var agents []store.AgentItem
	for i, s := range trickyStrings {
		agents = append(agents, store.AgentItem{ID: "agt_" + s, Name: s, Enabled: i%2 == 0, CreatedAt: created.Add(time.Duration(i) * time.Hour)})
	}
	for _, c := range []struct {
		agents []store.AgentItem
		m      meta
	}{
		{nil, meta{Limit: 30}},
		{agents[:1], meta{Limit: 1, Next: &next, HasMore: true}},
		{agents, meta{Limit: 100}},
	} {
		items := make([]wire.AgentItem, len(c.agents))
		for i, ag := range c.agents {
			items[i] = wire.AgentItem{ID: ag.ID, Name: ag.Name, Enabled: ag.Enabled, CreatedAt: wire.Time(ag.CreatedAt)}
		}
		want := encodeStd(t, collection{Data: items, Meta: c.m})
		if got := appendAgentPage(nil, c.agents, c.m); !bytes.Equal(got, want) {
			t.Fatalf("agent page\n got %s\nwant %s", got, want)
		}
	}
}
func FuzzAppendTime(f *testing.F) {
	for _, ns := range []int64{0, -1, 1, 1_700_000_000_123_456_789, -9_000_000_000_000_000_000, 9_000_000_000_000_000_000} {
		f.Add(ns)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		tm := time.Unix(0, ns).In(time.FixedZone("z", int(ns%50_000)))
		want := `"` + wire.Time(tm) + `"`
		if got := string(appendTime(nil, tm)); got != want {
			t.Fatalf("appendTime(%v) = %s, wire.Time %s", tm, got, want)
		}
	})
}

func TestAppendTimeEdges(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 2, 28, 23, 59, 59, 1_000_000, time.FixedZone("m", -3600)),
	} {
		if got, want := string(appendTime(nil, tm)), `"`+wire.Time(tm)+`"`; got != want {
			t.Errorf("appendTime(%v) = %s, want %s", tm, got, want)
		}
	}
}

// A body nested deeper than encoding/json accepts is refused with a message
