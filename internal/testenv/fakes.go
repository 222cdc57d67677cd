package testenv

import (
	"strings"
	"sync"
	"time"
)

// Clock is a test's injectable time: it moves only when told to, so tests
// of expiry and rate-limit windows never sleep.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time; pass it where code takes a now func.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// SyncBuffer collects the log output of concurrent requests.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
