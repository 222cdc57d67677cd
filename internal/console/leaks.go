package console

import (
	"context"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
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
// newest first (at most what keys.RecentLeaks returns).
func (c *Console) leakRows(ctx context.Context, accountID string, now time.Time) ([]leakRow, error) {
	ls, err := c.Keys.RecentLeaks(ctx, accountID, now.Add(-leakWindow))
	if err != nil {
		return nil, err
	}
	var out []leakRow
	for _, l := range ls {
		row := leakRow{KeyID: l.Event.KeyID, KeyName: l.Event.KeyID, URL: l.URL, At: l.Event.CreatedAt}
		k, err := c.Keys.Get(ctx, accountID, l.Event.KeyID)
		switch {
		case err == nil:
			row.KeyName, row.KeyPrefix = k.Name, k.Prefix
		case !domain.IsCode(err, domain.CodeNotFound):
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}
