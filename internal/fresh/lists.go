package fresh

import (
	"context"
	"time"
)

// ListStaleBound is the age past which a page read under a list version is
// read again whatever its version: the bound on a stale page when a
// version could not be set (Redis away) or Redis went back to an older
// copy.
const ListStaleBound = time.Second

// ListVersion is an account's agent-list version as the request read it,
// with its rate-limit decision, before asking for the page; OK is false
// when none was read.
type ListVersion struct {
	Value int64 // -1: Redis holds none
	OK    bool
}

// ListToken is what a page of an account's agent list is read under: a
// page held under a token is current while the token is the same (and,
// Expires, for at most ListStaleBound after it was read).
//
//   - With a list version (Redis): the account's version as the request
//     read it and the count of agent writes committed through this store
//     to the account's share of accounts (AgentWrites). A writer sets a
//     new version after its commit and before it answers, so a change
//     committed after the page's read, by any instance, moves the token
//     before its writer answers.
//   - On SQLite without one: the change token of a check (Check), a
//     data_version that moves with every commit by any connection of any
//     process.
//
// PostgreSQL without Redis has no token short of a round trip, which costs
// what the page does: there is none (ok false).
type ListToken struct {
	Change  ChangeToken // SQLite without a version
	Version int64
	Writes  uint64
	Expires bool // a version's: the page expires after ListStaleBound
}

// ListToken is the token a page of accountID's list asked for with v
// would be read under; ok is false where there is none.
func (t *Tracker) ListToken(ctx context.Context, accountID string, v ListVersion) (tok ListToken, ok bool) {
	if v.OK && t.mirror != nil {
		return ListToken{Version: v.Value, Writes: t.AgentWrites(accountID), Expires: true}, true
	}
	if t.watch == nil {
		return ListToken{}, false
	}
	m, err := t.Check(ctx)
	if err != nil || !m.ChangeOK {
		// The check failing says nothing about the page: read it.
		return ListToken{}, false
	}
	return ListToken{Change: m.Change}, true
}
