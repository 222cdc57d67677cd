package console

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
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
	Filter logFilter
	// The choices of the filters' dropdowns.
	Statuses []string
	Routes   []string
	Ranges   []rangeOption
	Keys     []domain.APIKey
	Rows     []logRow
	Pager    pager
	// Count is how many logs the filters keep, as the page shows it
	// ("1,234", "10,000+").
	Count string
	// CountNote says what a count that stopped at countBudget counted.
	CountNote string
	// Chips are the filters in use, each with the address without it.
	Chips []chip
	// Errors are every filter that could not be used, in the form's
	// order; Invalid holds their fields.
	Errors  []filterError
	Invalid map[string]bool
	// Tail is the live tail's address with the page's filters ("" on a
	// later page, or when a filter is in error).
	Tail string
}

type rangeOption struct{ Value, Label string }

type chip struct{ Label, Value, Remove string }

type filterError struct{ Field, Message string }

// logFilter is the page's query, as the form shows it.
type logFilter struct {
	Key, Status, Route, RequestID, Range, From, To string
}

// values are f's fields as a link carries them.
func (f logFilter) values() url.Values {
	return url.Values{"key": {f.Key}, "status": {f.Status}, "route": {f.Route}, "id": {f.RequestID}, "range": {f.Range}, "from": {f.From}, "to": {f.To}}
}

// dateTimeLocal is the layout of an <input type="datetime-local">.
const dateTimeLocal = "2006-01-02T15:04"

// logStatuses are the status dropdown's choices past the classes: the
// statuses /v1 answers (docs/api.md, Errors), and 499 for a client that
// went away.
var logStatuses = []string{"200", "201", "204", "400", "401", "403", "404", "409", "413", "415", "422", "499", "500", "503"}

// logRanges are the quick time ranges: each the last so long, to now.
var logRanges = []struct {
	rangeOption
	d time.Duration
}{
	{rangeOption{"15m", "Last 15 minutes"}, 15 * time.Minute},
	{rangeOption{"1h", "Last hour"}, time.Hour},
	{rangeOption{"24h", "Last 24 hours"}, 24 * time.Hour},
	{rangeOption{"7d", "Last 7 days"}, 7 * 24 * time.Hour},
}

// customRange is the range choice that reads From and To.
const customRange = "custom"

// The Logs page's count looks at up to countBudget logs (newest first, of
// those the key and class filters let through) for up to countTime: past
// either it says "N+", counted among the newest so many. A count of a
// whole account's 100,000 logs cost a page 0.3 to 0.9 s (BenchmarkLogsPage
// key, status-404); so bounded it costs a first page at most countTime
// more, and later pages, which show no count, nothing.
const (
	countBudget = 10_000
	countTime   = 30 * time.Millisecond
)

// countLogs sets p's count of the logs q keeps.
func (c *Console) countLogs(ctx context.Context, p *logsPage, q store.RequestLogQuery) error {
	ctx, cancel := context.WithTimeout(ctx, countTime)
	defer cancel()
	n, looked, complete, err := c.Store.CountRequestLogs(ctx, q, countBudget)
	if err != nil {
		return err
	}
	p.Count = thousands(int64(n))
	switch {
	case !complete && looked == 0:
		p.Count, p.CountNote = "Requests", "too many to count quickly"
	case !complete:
		p.Count += "+ requests"
		p.CountNote = "counted among the newest " + thousands(int64(looked))
	case n == 1:
		p.Count += " request"
	default:
		p.Count += " requests"
	}
	return nil
}

// readLogFilter reads the filters but the key (logKey) into q, at now;
// every value it cannot use is an error naming its field.
func readLogFilter(v url.Values, q *store.RequestLogQuery, now time.Time) (logFilter, []filterError) {
	// The form echoes every value, each its publicTerm: a pasted
	// credential filters by its key, and shows as its prefix only.
	f := logFilter{Key: publicTerm(v.Get("key")), Status: publicTerm(v.Get("status")),
		Route: publicTerm(v.Get("route")), RequestID: publicTerm(v.Get("id")),
		Range: publicTerm(v.Get("range")), From: publicTerm(v.Get("from")), To: publicTerm(v.Get("to"))}
	var errs []filterError
	bad := func(field, msg string) { errs = append(errs, filterError{field, msg}) }
	for _, t := range []struct{ name, s string }{{"id", f.RequestID}, {"key", f.Key}, {"route", f.Route}} {
		if len(t.s) > store.MaxSearch || !utf8.ValidString(t.s) || strings.IndexByte(t.s, 0) >= 0 {
			bad(t.name, "Enter at most "+strconv.Itoa(store.MaxSearch)+" characters of text.")
		}
	}
	q.RequestID = f.RequestID
	if msg := readStatus(f.Status, q); msg != "" {
		bad("status", msg)
	}
	if f.Route != "" && len(f.Route) <= store.MaxSearch {
		route, ok := requestlog.RouteOf(f.Route)
		if !ok {
			bad("route", "Choose a route from the list, or paste a path such as /v1/ai-agents/agt_123.")
		}
		f.Route, q.Route = cmp.Or(route, f.Route), route
	}
	for _, e := range readRange(&f, q, now) {
		bad(e.Field, e.Message)
	}
	return f, errs
}

// readStatus reads the status filter into q: a class or a code; the
// message says what is wrong with it.
func readStatus(st string, q *store.RequestLogQuery) string {
	if st == "" {
		return ""
	}
	if classIndex(st) >= 0 {
		q.Class = st
		return ""
	}
	code, err := strconv.Atoi(st)
	if err != nil || code < 100 || code > 599 {
		return "Enter a status class (2xx, 4xx, 429, 5xx) or a code such as 404."
	}
	q.Status = code
	return ""
}

// readRange reads the time filter into q: a quick range, the last so
// long to now (From and To left out), or From and To (UTC).
func readRange(f *logFilter, q *store.RequestLogQuery, now time.Time) []filterError {
	for _, r := range logRanges {
		if f.Range == r.Value {
			q.From = now.Add(-r.d)
			f.From, f.To = "", ""
			return nil
		}
	}
	var errs []filterError
	if f.Range != "" && f.Range != customRange {
		errs = append(errs, filterError{"range", "Choose a range from the list."})
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
			errs = append(errs, filterError{t.fld, "Enter a time as 2026-11-22T14:05 (UTC)."})
			continue
		}
		*t.dst = at
	}
	if !q.To.IsZero() && q.To.Before(q.From) {
		errs = append(errs, filterError{"to", "Enter a To time after the From time."})
	}
	if f.From != "" || f.To != "" {
		f.Range = customRange
	}
	return errs
}

// logQuery reads the page's filters, the key's included, into q; errs
// are every filter it could not use.
func (c *Console) logQuery(r *http.Request, q *store.RequestLogQuery) (logFilter, []filterError, error) {
	f, errs := readLogFilter(r.URL.Query(), q, c.Now())
	if len(f.Key) <= store.MaxSearch {
		var err error
		q.KeyID, err = c.logKey(r.Context(), q.AccountID, f.Key)
		if e, ok := err.(*pageError); ok {
			errs = append(errs, filterError{e.Field, e.Message})
		} else if err != nil {
			return f, nil, err
		}
	}
	// In the form's order.
	order := []string{"id", "key", "status", "route", "range", "from", "to"}
	slices.SortStableFunc(errs, func(a, b filterError) int {
		return cmp.Compare(slices.Index(order, a.Field), slices.Index(order, b.Field))
	})
	return f, errs, nil
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
	f, errs, err := c.logQuery(r, &q)
	if err != nil {
		return err
	}
	p := logsPage{Filter: f, Statuses: append(slices.Clone(requestlog.Classes), logStatuses...), Routes: requestlog.Routes, Invalid: map[string]bool{}}
	for _, r := range logRanges {
		p.Ranges = append(p.Ranges, r.rangeOption)
	}
	if p.Keys, _, err = c.Store.KeyPage(r.Context(), store.KeyPageQuery{AccountID: s.user.AccountID, Limit: maxPickerKeys}); err != nil {
		return err
	}
	if len(errs) > 0 {
		// The form again, every field at fault marked, and no logs.
		p.Errors = errs
		for _, e := range errs {
			p.Invalid[e.Field] = true
		}
		return c.render(w, r, s, http.StatusBadRequest, "logs", "Logs", p)
	}
	if err := c.fillLogs(r.Context(), &p, q, lp, back); err != nil {
		return err
	}
	return c.render(w, r, s, http.StatusOK, "logs", "Logs", p)
}

// maxPickerKeys bounds the keys the key filter's dropdown offers; any
// other is found by typing its name or prefix.
const maxPickerKeys = 100

// fillLogs reads the page's logs, their count and links.
func (c *Console) fillLogs(ctx context.Context, p *logsPage, q store.RequestLogQuery, lp listParams, back []string) error {
	logs, next, err := c.Store.RequestLogPage(ctx, q)
	if err != nil {
		return err
	}
	labels, err := keyLabels(ctx, c.Store, q.AccountID, logs, func(l requestlog.Log) string { return l.KeyID })
	if err != nil {
		return err
	}
	p.Rows = logRows(logs, labels)
	// The count on the first page only: it is every page's, and costs.
	switch {
	case !lp.After.IsZero():
	case q.RequestID != "":
		p.Count = thousands(int64(len(logs))) + " request"
		if len(logs) != 1 {
			p.Count += "s"
		}
	default:
		if err := c.countLogs(ctx, p, q); err != nil {
			return err
		}
	}
	keep := p.Filter.values()
	p.Pager = logsPager(keep, lp, back, next)
	if _, ok := labels[q.KeyID]; !ok && q.KeyID != "" {
		if labels, err = c.Store.KeyLabels(ctx, q.AccountID, []string{q.KeyID}); err != nil {
			return err
		}
	}
	p.Chips = logChips(p.Filter, labels[q.KeyID])
	if lp.After.IsZero() {
		p.Tail = linker(tailPath, keep)(store.Cursor{})
	}
	return nil
}

// logChips are the filters in use, each with the page's address without it.
func logChips(f logFilter, key store.KeyLabel) []chip {
	keep := f.values()
	without := func(names ...string) string {
		v := maps.Clone(keep)
		for _, n := range names {
			delete(v, n)
		}
		return linker(logsPath, v)(store.Cursor{})
	}
	var out []chip
	if f.RequestID != "" {
		out = append(out, chip{"Request", f.RequestID, without("id")})
	}
	if f.Key != "" {
		out = append(out, chip{"Key", cmp.Or(strings.TrimSpace(key.Name+" "+key.Prefix), f.Key), without("key")})
	}
	if f.Status != "" {
		out = append(out, chip{"Status", f.Status, without("status")})
	}
	if f.Route != "" {
		out = append(out, chip{"Route", f.Route, without("route")})
	}
	for _, r := range logRanges {
		if f.Range == r.Value {
			out = append(out, chip{"Time", r.Label, without("range")})
		}
	}
	if f.Range == customRange && (f.From != "" || f.To != "") {
		out = append(out, chip{"Time", cmp.Or(f.From, "…") + " → " + cmp.Or(f.To, "now") + " UTC", without("range", "from", "to")})
	}
	return out
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

// The detail of one request: /console/developers/logs/{id}, its request
// id, the account's only (another account's is 404, as any id no log
// holds).

type logDetail struct {
	logRow
	Meaning, Advice string // of its error code (docs/api.md, Errors)
	StatusText      string
	AtUTC           string
	// Links to the logs around it: its key's, its route's, and its key's
	// in the minutes about it.
	KeyLogs, RouteLogs, AroundLogs string
}

// codeMeanings are the error codes' meanings and what a client does about
// each, as docs/api.md's Errors table says them. A log keeps the code,
// not the answer's message (docs/console.md, Logs).
var codeMeanings = map[string][2]string{
	"missing_field":       {"A required attribute was not supplied.", "Fix the request; the answer's errors named the field. Not retried unchanged."},
	"invalid_value":       {"A value was not acceptable; the answer's message named the accepted set.", "Fix the value; not retried unchanged."},
	"datatype_mismatch":   {"An attribute had the wrong type.", "Fix the request; not retried unchanged."},
	"invalid_field":       {"An attribute is not part of the request's contract.", "Remove it; not retried unchanged."},
	"invalid_json":        {"The body was not parseable JSON.", "Fix the body; not retried unchanged."},
	"invalid_credentials": {"The Authorization header was missing or malformed, or the key is unknown, revoked or expired.", "Needs a person: a new or rotated key."},
	"token_expired":       {"The credential is no longer valid for time-based reasons.", "Needs a person: a new or rotated key."},
	"access_denied":       {"The key lacks a scope, its AI agent restriction was violated, or the credential came in the query string.", "Give the key the scope or agent it needs, or send the key in the Authorization header."},
	"feature_not_enabled": {"The operation depends on a feature not switched on for the account or AI agent.", "Switch the feature on, or stop calling this operation."},
	"not_found":           {"No such record in the account, or the key may not see it.", "Check the id and the key's AI agent restriction."},
	"duplicate_value":     {"A uniqueness rule was violated; the answer carried existing_id.", "May be treated as success, using existing_id."},
	"immutable_state":     {"The record is in a state that does not allow the change.", "Read the record again before retrying."},
	"inconsistent_state":  {"The request conflicts with related data.", "Read the record again before retrying."},
	"file_too_large":      {"The upload exceeded the permitted size.", "Send less."},
	"unsupported_type":    {"The content type or file type is not accepted.", "Send application/json."},
	"rate_limit_exceeded": {"The key's per-minute ceiling was reached; Retry-After was sent.", "Retry only after Retry-After seconds, or raise the key's rate limit."},
	"server_error":        {"A failure on the service's side.", "Safe to retry with exponential backoff and jitter."},
}

// maxRequestID bounds a request id in a detail page's address.
const maxRequestID = 64

func (c *Console) handleLog(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if id == "" || len(id) > maxRequestID || strings.ContainsFunc(id, func(r rune) bool {
		return r > unicode.MaxASCII || !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-'
	}) {
		return errNotFound
	}
	logs, _, err := c.Store.RequestLogPage(r.Context(), store.RequestLogQuery{AccountID: s.user.AccountID, RequestID: id, Limit: 1})
	if err != nil {
		return err
	}
	if len(logs) == 0 {
		return errNotFound
	}
	labels, err := c.Store.KeyLabels(r.Context(), s.user.AccountID, []string{logs[0].KeyID})
	if err != nil {
		return err
	}
	d := logDetail{logRow: logRows(logs, labels)[0]}
	m := codeMeanings[d.ErrorCode]
	d.Meaning, d.Advice = m[0], m[1]
	d.StatusText = http.StatusText(d.Status)
	if d.Status == 499 {
		d.StatusText = "Client Closed Request"
	}
	d.AtUTC = d.At.UTC().Format("2006-01-02 15:04:05.000 UTC")
	logsOf := func(v url.Values) string { return linker(logsPath, v)(store.Cursor{}) }
	d.KeyLogs = logsOf(url.Values{"key": {d.KeyID}})
	if d.Route != "" {
		d.RouteLogs = logsOf(url.Values{"route": {d.Route}})
	}
	at := d.At.UTC().Truncate(time.Minute)
	d.AroundLogs = logsOf(url.Values{"key": {d.KeyID}, "from": {at.Add(-5 * time.Minute).Format(dateTimeLocal)}, "to": {at.Add(6 * time.Minute).Format(dateTimeLocal)}})
	return c.render(w, r, s, http.StatusOK, "logdetail", "Request "+d.ID, d)
}
