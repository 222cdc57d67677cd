package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

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

// listParams are a list request's search and cursor.
type listParams struct {
	Search string
	After  store.Cursor
}

// readList reads ?q= (trimmed; at most store.MaxSearch bytes of UTF-8)
// and ?after=.
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
	return listParams{Search: search, After: after}, nil
}

// pager is what a list template needs for its links: the search as given,
// the next page's address ("" on the last page) and the first page's (""
// on the first page).
type pager struct {
	Search      string
	Next, First string
}

// pagerOf builds the links of a list at path; keep are the query
// parameters every page keeps (the search and any filter), empty ones left
// out.
func pagerOf(path string, keep url.Values, lp listParams, next store.Cursor) pager {
	q := url.Values{}
	for k, vs := range keep {
		for _, v := range vs {
			if v != "" {
				q.Add(k, v)
			}
		}
	}
	link := func(after string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		if after != "" {
			v.Set("after", after)
		}
		if e := v.Encode(); e != "" {
			return path + "?" + e
		}
		return path
	}
	p := pager{Search: lp.Search}
	if !next.IsZero() {
		p.Next = link(next.String())
	}
	if !lp.After.IsZero() {
		p.First = link("")
	}
	return p
}
