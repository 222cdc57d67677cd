package console

import (
	"slices"
	"testing"
	"time"
)

func TestRelative(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-20 * time.Second, "just now"}, {3*time.Minute + 59*time.Second, "3 min ago"}, {-5 * time.Minute, "in 5 min"},
		{2 * time.Hour, "2 h ago"}, {36 * time.Hour, "1 day ago"}, {-72 * time.Hour, "in 3 days"},
		{45 * 24 * time.Hour, "2026-10-08"},
	} {
		if got := relative(now.Add(-tc.d), now); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestNaturalCompare(t *testing.T) {
	names := []string{"Agent 10", "agent 2", "Agent 1", "Agent 02b", "Agent", "Bot 9", "Agent 100", "Agent 2a"}
	slices.SortFunc(names, naturalCompare)
	want := []string{"Agent", "Agent 1", "agent 2", "Agent 2a", "Agent 02b", "Agent 10", "Agent 100", "Bot 9"}
	if !slices.Equal(names, want) {
		t.Errorf("%q\nwant %q", names, want)
	}
}
