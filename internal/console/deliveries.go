package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// An endpoint's page: its settings, what can be done to it, and its
// deliveries log (every attempt, newest first, pageSize a page).

// attemptRow is one delivery attempt as the log shows it.
type attemptRow struct {
	domain.WebhookAttempt
	// Class is the answer's status class for the log's colours ("2xx",
	// "4xx", "429", "5xx"), "" when no answer came.
	Class string
	// Body is the answer's first 1 KiB with control and direction
	// characters made visible (visibleText).
	Body string
}

func (r attemptRow) at() (time.Time, string) { return r.CreatedAt, r.ID }

// attemptStatuses are the log's status filter: "" is every attempt.
var attemptStatuses = []option{
	{Value: "", Label: "All attempts"},
	{Value: "succeeded", Label: "Succeeded"},
	{Value: "failed", Label: "Failed"},
}

type endpointPage struct {
	Endpoint endpointRow
	Attempts []attemptRow
	// Status and EventID are the log's filters as read.
	Status   string
	Statuses []option
	EventID  string
	Pager    pager
	formError
}

// deliveryFilter is the log's filters from the page's address.
type deliveryFilter struct {
	status, event string
	lp            listParams
}

// maxEventID bounds the event id filter (ids are 30 characters).
const maxEventID = 64

func validEventID(s string) bool {
	if len(s) > maxEventID {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func readDeliveryFilter(r *http.Request) (deliveryFilter, error) {
	lp, err := readList(r)
	if err != nil {
		return deliveryFilter{}, err
	}
	q := r.URL.Query()
	f := deliveryFilter{status: q.Get("status"), event: strings.TrimSpace(q.Get("event")), lp: lp}
	if !slices.ContainsFunc(attemptStatuses, func(o option) bool { return o.Value == f.status }) {
		return deliveryFilter{}, errBadPageLink
	}
	return f, nil
}

// errEventID is an event id filter that cannot name an event.
var errEventID = fieldError("event", "An event id is evt_ followed by lower-case letters and digits, as the log shows it.")

// showEndpoint is an endpoint's page, with e (a refused action) on it.
func (c *Console) showEndpoint(w http.ResponseWriter, r *http.Request, s *session, e *pageError) error {
	f, err := readDeliveryFilter(r)
	if err != nil {
		return err
	}
	ep, err := c.endpointRow(r, s)
	if err != nil {
		return err
	}
	p := endpointPage{Endpoint: ep, Status: f.status, Statuses: choose(attemptStatuses, f.status), EventID: f.event}
	if e == nil && !validEventID(f.event) {
		// A filter typed wrong: said beside it, the log left empty.
		return c.renderForm(w, r, s, errEventID, "webhook", isolate(ep.URL), &p)
	}
	rows, more, err := c.attempts(r, s, ep.ID, f)
	if err != nil {
		return err
	}
	p.Attempts = rows
	p.Pager = pagerBoth(endpointPath(ep.ID), url.Values{"status": {f.status}, "event": {f.event}}, f.lp, more, rows, attemptRow.at)
	return c.renderForm(w, r, s, e, "webhook", isolate(ep.URL), &p)
}

// attempts reads a page of the endpoint's log: the store gives one row
// more than asked when there are more that way.
func (c *Console) attempts(r *http.Request, s *session, id string, f deliveryFilter) ([]attemptRow, store.Cursor, error) {
	list, err := c.Webhooks.Attempts(r.Context(), webhookActor(s), store.AttemptQuery{EndpointID: id,
		Status: f.status, EventID: f.event, Before: f.lp.After, Limit: pageSize})
	if err != nil {
		return nil, store.Cursor{}, err
	}
	var more store.Cursor
	if len(list) > pageSize {
		list = list[:pageSize]
		last := list[pageSize-1]
		more = store.Cursor{CreatedAt: last.CreatedAt, ID: last.ID, Back: f.lp.After.Back}
	}
	if f.lp.After.Back {
		slices.Reverse(list)
	}
	rows := make([]attemptRow, len(list))
	for i, a := range list {
		rows[i] = attemptRow{WebhookAttempt: a, Class: statusClass(a.ResponseStatus), Body: visibleText(a.ResponseBody)}
	}
	return rows, more, nil
}

// statusClass is an answer's status as the logs colour it.
func statusClass(code int) string {
	switch {
	case code == 0:
		return ""
	case code == http.StatusTooManyRequests:
		return "429"
	case code >= 500:
		return "5xx"
	case code >= 400:
		return "4xx"
	}
	return "2xx"
}

// visibleText is an answer as the log shows it: control characters
// (but newlines and tabs) and the characters that reorder text (bidi
// controls) written as their code points, so that an answer cannot hide
// or reorder what is around it or within it.
func visibleText(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if hiddenRune(r) {
			b.WriteString("<U+" + strings.ToUpper(strconv.FormatInt(int64(r), 16)) + ">")
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hiddenRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f:
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// handleDeliveryFilter sends the log's filter form on to the endpoint's
// page with the filters in its address (the form posts, as every search
// form does: lists.go).
func (c *Console) handleDeliveryFilter(_ http.ResponseWriter, r *http.Request, _ *session) error {
	keep := url.Values{}
	status, event := r.PostForm.Get("status"), strings.TrimSpace(r.PostForm.Get("event"))
	keep.Set("status", status)
	keep.Set("event", publicTerm(event)[:min(len(publicTerm(event)), maxEventID+1)])
	return seeOther(linker(endpointPath(r.PathValue("id")), keep)(store.Cursor{}))
}
