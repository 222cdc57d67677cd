package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// The account-wide Logs page (Owner, Admin): the /v1 requests that
// identified a key, newest first, 50 a page by keyset, filtered by key,
// status class or code, route and time range (UTC), or found by request
// id — the X-Request-Id of a response, as an error message names it.
// The store reads logs forward only, so each page link carries back=, the
// starts of up to maxBack pages before it, oldest first: Previous reads
// again from the last of them, and the pages before those are « First.

// logsPath is the Logs page's address.
const logsPath = "/console/developers/logs"

// maxBack bounds a Logs page link's back= trail.
const maxBack = 8

// firstStart stands for the first page in a back= trail.
const firstStart = "first"

type logRow struct {
	requestlog.Log
	KeyName, KeyPrefix string
	Class              string
	DurationMS         string
}

type logsPage struct {
	Filter  logFilter
	Classes []string
	Rows    []logRow
	Pager   pager
	// formError: a filter that could not be used, and its name.
	formError
}

// logFilter is the page's query, as the form shows it.
type logFilter struct {
	Key, Status, Route, RequestID, From, To string
}

// dateTimeLocal is the layout of an <input type="datetime-local">.
const dateTimeLocal = "2006-01-02T15:04"

// readLogFilter reads the filters but the key (logKey) into q; a value it
// cannot use is a 400 naming the field.
func readLogFilter(r *http.Request, q *store.RequestLogQuery) (logFilter, error) {
	// The form echoes every value, each its publicTerm: a pasted
	// credential filters by its key, and shows as its prefix only.
	v := r.URL.Query()
	f := logFilter{Key: publicTerm(v.Get("key")), Status: publicTerm(v.Get("status")),
		Route: publicTerm(v.Get("route")), RequestID: publicTerm(v.Get("id")),
		From: publicTerm(v.Get("from")), To: publicTerm(v.Get("to"))}
	for name, s := range map[string]string{"key": f.Key, "route": f.Route, "id": f.RequestID} {
		if len(s) > store.MaxSearch || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return f, &pageError{Status: http.StatusBadRequest, Field: name, Message: "Enter at most " + strconv.Itoa(store.MaxSearch) + " characters of text."}
		}
	}
	q.Route, q.RequestID = f.Route, f.RequestID
	switch st := f.Status; {
	case st == "":
	case classIndex(st) >= 0:
		q.Class = st
	default:
		code, err := strconv.Atoi(st)
		if err != nil || code < 100 || code > 599 {
			return f, &pageError{Status: http.StatusBadRequest, Field: "status", Message: "Enter a status class (2xx, 4xx, 429, 5xx) or a code such as 404."}
		}
		q.Status = code
	}
	for _, t := range []struct {
		s   string
		dst *time.Time
		fld string
	}{{f.From, &q.From, "from"}, {f.To, &q.To, "to"}} {
		if t.s == "" {
			continue
		}
		at, err := time.ParseInLocation(dateTimeLocal, t.s, time.UTC)
		if err != nil {
			return f, &pageError{Status: http.StatusBadRequest, Field: t.fld, Message: "Enter a time as 2026-11-22T14:05 (UTC)."}
		}
		*t.dst = at
	}
	if !q.To.IsZero() && q.To.Before(q.From) {
		return f, &pageError{Status: http.StatusBadRequest, Field: "to", Message: "Enter a To time after the From time."}
	}
	return f, nil
}

func (c *Console) handleLogs(w http.ResponseWriter, r *http.Request, s *session) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	back, err := readBack(r, lp.After)
	if err != nil {
		return err
	}
	q := store.RequestLogQuery{AccountID: s.user.AccountID, After: lp.After, Limit: pageSize}
	f, err := readLogFilter(r, &q)
	if err == nil {
		q.KeyID, err = c.logKey(r.Context(), s.user.AccountID, f.Key)
	}
	p := logsPage{Filter: f, Classes: requestlog.Classes}
	if e, ok := err.(*pageError); ok {
		// The form again, the field marked, and no logs.
		return c.renderForm(w, r, s, e, "logs", "Logs", &p)
	}
	if err != nil {
		return err
	}
	logs, next, err := c.Store.RequestLogPage(r.Context(), q)
	if err != nil {
		return err
	}
	labels, err := keyLabels(r.Context(), c.Store, q.AccountID, logs, func(l requestlog.Log) string { return l.KeyID })
	if err != nil {
		return err
	}
	p.Rows = logRows(logs, labels)
	keep := url.Values{"key": {f.Key}, "status": {f.Status}, "route": {f.Route}, "id": {f.RequestID}, "from": {f.From}, "to": {f.To}}
	p.Pager = logsPager(keep, lp, back, next)
	return c.render(w, r, s, http.StatusOK, "logs", "Logs", p)
}

// readBack reads ?back=, the starts of the pages before the one at after
// (none for the first page): each firstStart or a forward cursor, at most
// maxBack of them.
func readBack(r *http.Request, after store.Cursor) ([]string, error) {
	back := r.URL.Query()["back"]
	if len(back) > maxBack {
		return nil, errBadPageLink
	}
	for _, s := range back {
		if c, ok := store.ParseCursor(s); s != firstStart && (!ok || c.IsZero() || c.Back) {
			return nil, errBadPageLink
		}
	}
	if after.IsZero() {
		return nil, nil
	}
	return back, nil
}

// logsPager builds the Logs page's links: Next carries back with this
// page's start added (the oldest dropped past maxBack), Previous reads
// from back's last start with the rest.
func logsPager(keep url.Values, lp listParams, back []string, next store.Cursor) pager {
	with := func(back []string) func(store.Cursor) string {
		k := maps.Clone(keep)
		k["back"] = back
		return linker(logsPath, k)
	}
	p := pager{Search: lp.Search}
	start := firstStart
	if !lp.After.IsZero() {
		p.First = with(nil)(store.Cursor{})
		start = lp.After.String()
	}
	if !next.IsZero() {
		trail := append(slices.Clone(back), start)
		p.Next = with(trail[max(0, len(trail)-maxBack):])(next)
	}
	if n := len(back); n > 0 {
		var prev store.Cursor
		if back[n-1] != firstStart {
			prev, _ = store.ParseCursor(back[n-1])
		}
		p.Prev = with(back[:n-1])(prev)
	}
	return p
}

// logKey finds the account's key that the key filter names: by its id,
// else by its whole prefix or name (in any case), else the one key whose
// name contains the filter or whose prefix starts with it.
func (c *Console) logKey(ctx context.Context, accountID, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if byID, err := c.Store.KeyLabels(ctx, accountID, []string{v}); err != nil || len(byID) == 1 {
		return v, err
	}
	ks, _, err := c.Store.KeyPage(ctx, store.KeyPageQuery{AccountID: accountID, Search: v, Limit: pageSize})
	if err != nil {
		return "", err
	}
	for _, k := range ks {
		if strings.EqualFold(k.Prefix, v) || strings.EqualFold(k.Name, v) {
			return k.ID, nil
		}
	}
	switch len(ks) {
	case 0:
		return "", &pageError{Status: http.StatusBadRequest, Field: "key", Message: "No key of this account has this name, prefix or id."}
	case 1:
		return ks[0].ID, nil
	}
	return "", &pageError{Status: http.StatusBadRequest, Field: "key", Message: "More than one key matches: enter a key's whole name, prefix or id."}
}

func logRows(logs []requestlog.Log, labels map[string]store.KeyLabel) []logRow {
	out := make([]logRow, len(logs))
	for i, l := range logs {
		lb := labels[l.KeyID]
		// A row stored before paths were read decoded may hold a
		// credential percent-encoded: shown as its public prefix.
		l.Method, l.Path = credential.RedactText(l.Method), credential.RedactText(l.Path)
		out[i] = logRow{Log: l, KeyName: lb.Name, KeyPrefix: lb.Prefix, Class: requestlog.ClassOf(l.Status),
			DurationMS: strconv.FormatFloat(float64(l.Duration.Microseconds())/1000, 'f', 1, 64)}
	}
	return out
}
