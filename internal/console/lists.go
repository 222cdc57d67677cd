package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/store"
)

// Every list of the console is a page of at most pageSize rows, read by
// keyset (store.Cursor: "after this row"), never by OFFSET, and searchable;
// its links carry the search, any filter and the cursor in the query.

// pageSize is the most rows a list shows at once.
const pageSize = 50

// errBadPageLink is a list address whose cursor or filter is not one the
// console makes.
var errBadPageLink = &pageError{Status: http.StatusBadRequest, Message: "This page link is not valid. Start again from the first page."}

type listParams struct {
	Search string
	After  store.Cursor
}

// readList reads ?q= (trimmed; at most store.MaxSearch bytes of UTF-8;
// a credential in it cut to its public prefix, so that no page echoes
// its secret) and ?after=.
func readList(r *http.Request) (listParams, error) {
	q := r.URL.Query()
	search := strings.TrimSpace(q.Get("q"))
	if len(search) > store.MaxSearch || !utf8.ValidString(search) || strings.IndexByte(search, 0) >= 0 {
		return listParams{}, &pageError{Status: http.StatusBadRequest, Field: "q",
			Message: "Search for at most " + strconv.Itoa(store.MaxSearch) + " characters of text."}
	}
	after, ok := store.ParseCursor(q.Get("after"))
	if !ok {
		return listParams{}, errBadPageLink
	}
	return listParams{Search: credential.RedactText(search), After: after}, nil
}

// pager is what a list template needs for its links: the search as read,
// the previous and next pages' addresses and the first page's ("" where
// there is none: Prev and First on the first page, Next on the last).
type pager struct {
	Search            string
	Prev, Next, First string
}

// pagerBoth builds the links of a list that pages both ways: more is the
// store's cursor on the way the page was read (lp.After), rows the page's
// rows and at a row's cursor.
func pagerBoth[T any](path string, keep url.Values, lp listParams, more store.Cursor, rows []T, at func(T) (time.Time, string)) pager {
	var first, last store.Cursor
	if len(rows) > 0 {
		first.CreatedAt, first.ID = at(rows[0])
		last.CreatedAt, last.ID = at(rows[len(rows)-1])
	}
	forward, back := more, store.Cursor{}
	switch {
	case lp.After.Back:
		forward, back = last, more
	case !lp.After.IsZero():
		back = first
		back.Back = true
	}
	link := linker(path, keep)
	p := pager{Search: lp.Search}
	if !forward.IsZero() {
		p.Next = link(forward)
	}
	if !back.IsZero() {
		p.Prev, p.First = link(back), link(store.Cursor{})
	}
	if !lp.After.IsZero() && len(rows) == 0 {
		p.First = link(store.Cursor{}) // past the end: a way back, and no "none yet"
	}
	return p
}

// linker makes a list's page links: path with keep's non-empty values and
// the cursor.
func linker(path string, keep url.Values) func(store.Cursor) string {
	return func(c store.Cursor) string {
		v := url.Values{}
		for k, vs := range keep {
			v[k] = slices.DeleteFunc(slices.Clone(vs), func(s string) bool { return s == "" })
		}
		if !c.IsZero() {
			v.Set("after", c.String())
		}
		if e := v.Encode(); e != "" {
			return path + "?" + e
		}
		return path
	}
}
