package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

// Key notices (docs/console.md, Key notices): each key's undismissed
// anomalies, on its page and on Developers, until an Owner or Admin
// dismisses them (templates/keynotices.html).

// noticesShown is how many notices the Developers page shows, newest first.
const noticesShown = 20

// noticeBlock is what templates/keynotices.html shows.
type noticeBlock struct {
	List []keyNotice
	// OnKeyPage: the key's own page, which names no key and which the
	// dismissal returns to.
	OnKeyPage   bool
	MailEnabled bool
}

// keyNotice is one notice in words.
type keyNotice struct {
	store.KeyAnomaly
	Title string // what happened, short
	What  string // what happened, with what was seen
}

// anomalyDetails are the fields of an api_key.anomaly's details the notice
// words use (store/anomalies.go writes them).
type anomalyDetails struct {
	Network     string  `json:"network"`
	Address     string  `json:"address"`
	Count       int64   `json:"count"`
	Median      float64 `json:"median"`
	BucketStart string  `json:"bucket_start"`
	LastUsedAt  *string `json:"last_used_at"`
	CreatedAt   string  `json:"created_at"`
	IdleDays    int     `json:"idle_days"`
}

// noticeWords is a notice's title and sentence.
func noticeWords(a store.KeyAnomaly) (title, what string) {
	var d anomalyDetails
	_ = json.Unmarshal(a.Details, &d) // written by the store: a field missing reads as zero
	switch a.Reason {
	case store.AnomalyNewNetwork:
		return "Used from a new network",
			fmt.Sprintf("A successful request came from %s, in %s, a network this key had not used in the last 30 days.", d.Address, d.Network)
	case store.AnomalySpike:
		return "Request spike",
			fmt.Sprintf("%s requests in the 10 minutes from %s, against a median of %s per 10 minutes over the 7 days before.",
				thousands(d.Count), shortTime(d.BucketStart), thousands(int64(d.Median)))
	case store.AnomalyAfterIdle:
		since := "had not been used since it was created on " + shortDate(d.CreatedAt)
		if d.LastUsedAt != nil {
			since = "was last used on " + shortDate(*d.LastUsedAt)
		}
		return "Used after an idle month",
			fmt.Sprintf("The key %s, %d days before, and was used again.", since, d.IdleDays)
	}
	return "Unusual use", "The key was used in an unusual way."
}

func shortTime(rfc string) string {
	t, err := time.Parse(wire.TimeFormat, rfc)
	if err != nil {
		return rfc
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func shortDate(rfc string) string {
	t, err := time.Parse(wire.TimeFormat, rfc)
	if err != nil {
		return rfc
	}
	return t.UTC().Format("2006-01-02")
}

// keyNotices reads the notices of key keyID, or of the account's
// unrevoked keys when it is "".
func (c *Console) keyNotices(ctx context.Context, accountID, keyID string) (noticeBlock, error) {
	list, err := c.Store.KeyAnomalies(ctx, accountID, keyID, noticesShown)
	b := noticeBlock{OnKeyPage: keyID != "", MailEnabled: c.MailEnabled, List: make([]keyNotice, len(list))}
	for i, a := range list {
		b.List[i].KeyAnomaly = a
		b.List[i].Title, b.List[i].What = noticeWords(a)
	}
	return b, err
}

// handleDismissNotice dismisses a key's notice (the form names its reason
// and event) and returns to the page it was on.
func (c *Console) handleDismissNotice(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	err := c.Keys.DismissNotice(r.Context(), keys.Actor{User: &s.user}, s.user.AccountID, id,
		r.PostForm.Get("reason"), r.PostForm.Get("event"))
	if err != nil {
		return err
	}
	c.Log.Info("console key notice dismissed", "key_id", id, "reason", r.PostForm.Get("reason"), "user_id", s.user.ID)
	if r.PostForm.Get("back") == "key" {
		return seeOther("/console/developers/keys/" + url.PathEscape(id) + "?done=notice-dismissed")
	}
	return seeOther("/console/developers?done=notice-dismissed")
}
