package domain

import (
	"strconv"
	"time"
)

// Bounds of a key policy's maximum lifetime, in days (docs/console.md, Key
// policy).
const (
	MinKeyLifetimeDays = 1
	MaxKeyLifetimeDays = 730
)

// KeyPolicy is what an account asks of its new keys: a maximum lifetime in
// days (0: none; then every new key needs an expiry within it) and whether
// they must name allowed addresses. Existing keys are not changed by it.
// An account that never set one has the zero policy, which asks nothing.
type KeyPolicy struct {
	MaxKeyLifetimeDays int
	RequireAllowedIPs  bool
	UpdatedAt          time.Time // zero: never set
}

// MaxLifetime is the policy's maximum lifetime, 0 for none.
func (p KeyPolicy) MaxLifetime() time.Duration {
	return time.Duration(p.MaxKeyLifetimeDays) * 24 * time.Hour
}

// Same reports whether p and o ask the same of new keys.
func (p KeyPolicy) Same(o KeyPolicy) bool {
	return p.MaxKeyLifetimeDays == o.MaxKeyLifetimeDays && p.RequireAllowedIPs == o.RequireAllowedIPs
}

// LifetimeWords is the maximum lifetime as people read it: "none" or
// "90 days".
func (p KeyPolicy) LifetimeWords() string {
	switch p.MaxKeyLifetimeDays {
	case 0:
		return "none"
	case 1:
		return "1 day"
	}
	return strconv.Itoa(p.MaxKeyLifetimeDays) + " days"
}
