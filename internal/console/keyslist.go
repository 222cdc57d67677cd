package console

import (
	"context"
	"strconv"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// The keys list as a control centre (docs/console.md, API keys): each
// key's last 24 hours as a sparkline with its error share, active keys
// apart from revoked and expired ones, and a warning on an ended key that
// is still being called. Everything comes from what the usage recorder
// already stores: refused requests of a revoked or expired key are counted
// and logged with its id (internal/api, serveV1), so no request pays for
// this page.

// sparkHours is how many hourly bars a sparkline draws.
const sparkHours = 24

// Sparkline geometry, in the SVG's own units.
const (
	sparkBarW  = 4
	sparkH     = 24
	sparkWidth = sparkHours * sparkBarW
)

// keyActivity is a key's last 24 hours as the list shows it.
type keyActivity struct {
	Start  time.Time // of the first hour
	Hours  [sparkHours]classCounts
	Total  int64
	Errors int64 // requests not answered 2xx
}

// ErrorShare is the part of the requests not answered 2xx, as "1.2 %"
// ("" without requests).
func (a keyActivity) ErrorShare() string {
	if a.Total == 0 {
		return ""
	}
	return strconv.FormatFloat(100*float64(a.Errors)/float64(a.Total), 'f', 1, 64) + " %"
}

// sparkBar is an hour of a sparkline: its total height and, drawn over
// its base, the part not answered 2xx.
type sparkBar struct {
	X, Y, H, ErrY, ErrH int
	Title               string
}

// Spark is the sparkline's bars, scaled to the busiest hour; an hour with
// any request is at least a unit tall, so that a few requests show.
func (a keyActivity) Spark() []sparkBar {
	var peak int64 = 1
	for _, h := range a.Hours {
		peak = max(peak, h[0]+h[1]+h[2]+h[3])
	}
	var out []sparkBar
	for i, h := range a.Hours {
		n := h[0] + h[1] + h[2] + h[3]
		if n == 0 {
			continue
		}
		bh := max(1, int(int64(sparkH-1)*n/peak))
		eh := 0
		if e := n - h[0]; e > 0 {
			eh = max(1, int(int64(sparkH-1)*e/peak))
		}
		out = append(out, sparkBar{X: i * sparkBarW, Y: sparkH - bh, H: bh, ErrY: sparkH - eh, ErrH: eh,
			Title: a.Start.Add(time.Duration(i)*time.Hour).Format("15:04") + " UTC: " + thousands(n) + " requests, " + thousands(n-h[0]) + " not 2xx"})
	}
	return out
}

// SparkWidth and SparkHeight size the sparkline's SVG.
func (keyActivity) SparkWidth() int  { return sparkWidth }
func (keyActivity) SparkHeight() int { return sparkH }

// stillCalled is a revoked or expired key that was called after it
// ended, in the last 24 hours: how often, and its last attempt with the
// address it came from (from its request log, when one is kept).
type stillCalled struct {
	Key    keyRow
	Count  int64
	Last   time.Time
	Client string
}

// keyActivities reads the account's keys' last 24 hours at now, in one
// query, per key.
func (c *Console) keyActivities(ctx context.Context, accountID string, now time.Time) (map[string]*keyActivity, error) {
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-sparkHours * time.Hour)
	counts, err := c.Store.AccountKeyBuckets(ctx, accountID, start, end, time.Hour)
	if err != nil {
		return nil, err
	}
	out := map[string]*keyActivity{}
	for _, n := range counts {
		i, ci := int(n.Start.Sub(start)/time.Hour), classIndex(n.Class)
		if i < 0 || i >= sparkHours || ci < 0 {
			continue
		}
		a := out[n.KeyID]
		if a == nil {
			a = &keyActivity{Start: start}
			out[n.KeyID] = a
		}
		a.Hours[i][ci] += n.Count
		a.Total += n.Count
		if ci > 0 {
			a.Errors += n.Count
		}
	}
	return out, nil
}

// endedAt is when a key stopped working: its revocation, else its expiry
// when past; zero for an active key.
func endedAt(k keyRow, now time.Time) time.Time {
	switch {
	case k.RevokedAt != nil:
		return *k.RevokedAt
	case k.ExpiresAt != nil && !k.ExpiresAt.After(now):
		return *k.ExpiresAt
	}
	return time.Time{}
}

// stillCalledKeys are the ended keys of rows called after they ended
// (within the last 24 hours): two reads per such key, bounded by the
// page's keys, none for a key without requests in the window.
func (c *Console) stillCalledKeys(ctx context.Context, accountID string, now time.Time, rows []listKey) ([]stillCalled, error) {
	var out []stillCalled
	for i := range rows {
		k := &rows[i]
		end := endedAt(k.keyRow, now)
		if end.IsZero() || k.Act.Total == 0 {
			continue
		}
		since := end
		if day := now.Add(-sparkHours * time.Hour); since.Before(day) {
			since = day
		}
		n, err := c.Store.KeyRequestsSince(ctx, k.ID, since, requestlog.Class2xx)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		k.Called = true
		sc := stillCalled{Key: k.keyRow, Count: n}
		logs, _, err := c.Store.RequestLogPage(ctx, store.RequestLogQuery{AccountID: accountID, KeyID: k.ID, From: since, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(logs) > 0 {
			sc.Last, sc.Client = logs[0].At, logs[0].Client
		}
		out = append(out, sc)
	}
	return out, nil
}

// listKey is a row of the keys list: the key and its last 24 hours.
type listKey struct {
	keyRow
	Act keyActivity
	// Called: ended, and called after it ended (stillCalled).
	Called bool
}

// Row is the key alone, for the templates shared with other pages.
func (k listKey) Row() keyRow { return k.keyRow }

// splitKeys puts the active keys of rows apart from the revoked and
// expired ones, each in the list's order, with their activity.
func splitKeys(rows []keyRow, act map[string]*keyActivity) (active, ended []listKey) {
	for _, k := range rows {
		lk := listKey{keyRow: k}
		if a := act[k.ID]; a != nil {
			lk.Act = *a
		}
		if k.Status == domain.KeyActive {
			active = append(active, lk)
		} else {
			ended = append(ended, lk)
		}
	}
	return active, ended
}
