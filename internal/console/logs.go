package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// The account-wide Logs page (Owner, Admin): the /v1 requests that
// identified a key, newest first, 50 a page by keyset, filtered by key,
// status class or code, route and time range (UTC), or found by request
// id — the X-Request-Id of a response, as an error message names it.

type logRow struct {
	requestlog.Log
	KeyName, KeyPrefix string
	Class              string
	DurationMS         string
}

type logsPage struct {
	Filter  logFilter
	Classes []option
	Rows    []logRow
	Pager   pager
}

// logFilter is the page's query, as the form shows it.
type logFilter struct {
	Key, Status, Route, RequestID, From, To string
}

// dateTimeLocal is the layout of an <input type="datetime-local">.
const dateTimeLocal = "2006-01-02T15:04"

// readLogFilter reads the filters into q; anything not made by the form
// is a 400 naming the field.
func readLogFilter(r *http.Request, q *store.RequestLogQuery) (logFilter, error) {
	v := r.URL.Query()
	f := logFilter{Key: strings.TrimSpace(v.Get("key")), Status: strings.TrimSpace(v.Get("status")),
		Route: strings.TrimSpace(v.Get("route")), RequestID: strings.TrimSpace(v.Get("id")),
		From: v.Get("from"), To: v.Get("to")}
	for name, s := range map[string]string{"key": f.Key, "route": f.Route, "id": f.RequestID} {
		if len(s) > store.MaxSearch || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return f, &pageError{Status: http.StatusBadRequest, Field: name, Message: "Enter at most " + strconv.Itoa(store.MaxSearch) + " characters of text."}
		}
	}
	q.KeyID, q.Route, q.RequestID = f.Key, f.Route, f.RequestID
	switch st := f.Status; {
	case st == "":
	case classIndex(st) >= 0:
		q.Class = st
	default:
		code, err := strconv.Atoi(st)
		if err != nil || code < 100 || code > 599 {
			return f, &pageError{Status: http.StatusBadRequest, Field: "status", Message: "Choose a status class, or enter a status code such as 404."}
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
	return f, nil
}

func (c *Console) handleLogs(w http.ResponseWriter, r *http.Request, s *session) error {
	lp, err := readList(r)
	if err != nil {
		return err
	}
	q := store.RequestLogQuery{AccountID: s.user.AccountID, After: lp.After, Limit: pageSize}
	f, err := readLogFilter(r, &q)
	if err != nil {
		return err
	}
	logs, next, err := c.store.RequestLogPage(r.Context(), q)
	if err != nil {
		return err
	}
	rows, err := c.labelledRows(r, s.user.AccountID, logs)
	if err != nil {
		return err
	}
	keep := url.Values{"key": {f.Key}, "status": {f.Status}, "route": {f.Route}, "id": {f.RequestID}, "from": {f.From}, "to": {f.To}}
	p := logsPage{Filter: f, Rows: rows, Pager: pagerOf("/console/developers/logs", keep, lp, next)}
	p.Classes = append(p.Classes, option{Value: "", Label: "Any status", Checked: f.Status == ""})
	for _, cl := range requestlog.Classes {
		p.Classes = append(p.Classes, option{Value: cl, Label: cl, Checked: f.Status == cl})
	}
	c.render(w, r, s, http.StatusOK, "logs", "Logs", p)
	return nil
}

// labelledRows names each log's key (one query for the page).
func (c *Console) labelledRows(r *http.Request, accountID string, logs []requestlog.Log) ([]logRow, error) {
	ids := make([]string, len(logs))
	for i, l := range logs {
		ids[i] = l.KeyID
	}
	labels, err := c.store.KeyLabels(r.Context(), accountID, ids)
	if err != nil {
		return nil, err
	}
	return logRows(logs, labels), nil
}

func logRows(logs []requestlog.Log, labels map[string]store.KeyLabel) []logRow {
	out := make([]logRow, len(logs))
	for i, l := range logs {
		lb := labels[l.KeyID]
		out[i] = logRow{Log: l, KeyName: lb.Name, KeyPrefix: lb.Prefix, Class: requestlog.ClassOf(l.Status),
			DurationMS: strconv.FormatFloat(float64(l.Duration.Microseconds())/1000, 'f', 1, 64)}
	}
	return out
}
