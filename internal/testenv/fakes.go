package testenv

import (
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/secretscan"
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

// CredentialShape matches an API credential anywhere in a text, by form,
// whoever minted it.
var CredentialShape = regexp.MustCompile(secretscan.CredentialPattern)

// ScanningWriter is a log sink for long runs: it keeps nothing but a count
// of writes and the prefix of the first credential-shaped text written, so
// memory measured across the run is the server's own.
type ScanningWriter struct {
	mu     sync.Mutex
	writes int64
	leaked string
}

func (s *ScanningWriter) Write(p []byte) (int, error) {
	m := CredentialShape.Find(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if m != nil && s.leaked == "" {
		s.leaked = string(m[9:21])
	}
	return len(p), nil
}

// Result returns the number of writes and the prefix of the first credential
// seen in them ("" when none).
func (s *ScanningWriter) Result() (writes int64, leakedPrefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.leaked
}
