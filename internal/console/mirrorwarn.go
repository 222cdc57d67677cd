package console

import (
	"strings"

	"github.com/agentapi/agentapi/internal/fresh"
)

// mirrorWarning is what the console says after a change that could make a
// held key wrong (a key revoked, rotated or edited; deactivating a user
// changes no key) was saved but the key epoch's mirror in Redis could not
// be raised: other instances may go on accepting the old key until their
// repair (fresh.StaleBound).
const mirrorWarning = "Saved, but other instances may accept the old key for up to 1 second: Redis did not take the change in time."

// mirrorTarget is target, asking for mirrorWarning when a write that rep
// watched (fresh.WithReport; nil: none) could not raise the mirror.
func mirrorTarget(rep *fresh.Report, target string) string {
	if rep == nil || rep.Err() == nil {
		return target
	}
	// render shows mirrorWarning for it: the query carries no text of its own.
	if strings.Contains(target, "?") {
		return target + "&mirror=late"
	}
	return target + "?mirror=late"
}
