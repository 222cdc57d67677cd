package console

import (
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestEndedAt: a key ended when revoked, else when its expiry passed; an
// active key (no expiry, or one to come) has not.
func TestEndedAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	revoked := now.Add(-2 * time.Hour)
	for _, tc := range []struct {
		name string
		k    domain.APIKey
		want time.Time
	}{
		{"active", domain.APIKey{}, time.Time{}},
		{"expiring later", domain.APIKey{ExpiresAt: &future}, time.Time{}},
		{"expired", domain.APIKey{ExpiresAt: &past}, past},
		{"revoked, then its expiry passed", domain.APIKey{RevokedAt: &revoked, ExpiresAt: &past}, revoked},
	} {
		if got := endedAt(keyRow{APIKey: tc.k}, now); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSparkAndErrorShare: bars scale to the busiest hour, an hour with a
// single request or a single error still shows (a unit tall), empty hours
// draw nothing, and the error share is of the requests not 2xx.
func TestSparkAndErrorShare(t *testing.T) {
	var a keyActivity
	a.Hours[0] = classCounts{1000, 0, 0, 0}
	a.Hours[5] = classCounts{0, 1, 0, 0}
	a.Hours[23] = classCounts{499, 0, 0, 1}
	a.Total, a.Errors = 1501, 2
	bars := a.Spark()
	if len(bars) != 3 {
		t.Fatalf("%d bars, want 3", len(bars))
	}
	if b := bars[0]; b.X != 0 || b.H != sparkH-1 || b.ErrH != 0 {
		t.Errorf("busiest hour: %+v", b)
	}
	if b := bars[1]; b.X != 5*sparkBarW || b.H != 1 || b.ErrH != 1 {
		t.Errorf("one error: %+v", b)
	}
	if b := bars[2]; b.H != (sparkH-1)/2 || b.ErrH != 1 || b.Y != sparkH-b.H {
		t.Errorf("half the peak with an error: %+v", b)
	}
	if s := a.ErrorShare(); s != "0.1 %" {
		t.Errorf("error share %q", s)
	}
	if s := (keyActivity{}).ErrorShare(); s != "" {
		t.Errorf("no requests: error share %q", s)
	}
}

// TestEditExpiries: only day counts ending before the key's expiry; all
// of them for a key that never expires; a date always.
func TestEditExpiries(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in40 := now.AddDate(0, 0, 40)
	vals := func(opts []option) (s string) {
		for _, o := range opts {
			s += o.Value + " "
		}
		return s
	}
	if got := vals(editExpiries(&in40, now)); got != "7 30 custom " {
		t.Errorf("expiring in 40 days: %q", got)
	}
	if got := vals(editExpiries(nil, now)); got != "7 30 90 365 custom " {
		t.Errorf("never expiring: %q", got)
	}
}
