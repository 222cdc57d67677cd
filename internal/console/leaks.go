package console

import (
	"cmp"
	"context"
	"time"

	"github.com/agentapi/agentapi/internal/keys"
)

// leakWindow is how long the Developers page names a key revoked as leaked.
const leakWindow = 30 * 24 * time.Hour

// leakRow is a key revoked because GitHub's secret scanning found it in
// public (docs/secret-scanning.md): the banner on the Developers page.
type leakRow struct {
	KeyID, KeyName, KeyPrefix string
	URL                       string // where it was found, as reported: shown as text only
	At                        time.Time
}

// leakRows lists the account's keys revoked as leaked within leakWindow,
// newest first (at most what keys.RecentLeaks returns), named in one query.
func (c *Console) leakRows(ctx context.Context, accountID string, now time.Time) ([]leakRow, error) {
	ls, err := c.Keys.RecentLeaks(ctx, accountID, now.Add(-leakWindow))
	if err != nil {
		return nil, err
	}
	labels, err := keyLabels(ctx, c.Store, accountID, ls, func(l keys.LeakedRevocation) string { return l.Event.KeyID })
	out := make([]leakRow, len(ls))
	for i, l := range ls {
		lb := labels[l.Event.KeyID]
		out[i] = leakRow{KeyID: l.Event.KeyID, KeyName: cmp.Or(lb.Name, l.Event.KeyID), KeyPrefix: lb.Prefix, URL: l.URL, At: l.Event.CreatedAt}
	}
	return out, err
}
