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

// readList reads ?q= (its publicTerm; at most store.MaxSearch bytes of
// UTF-8) and ?after=.
func readList(r *http.Request) (listParams, error) {
	q := r.URL.Query()
	search := publicTerm(q.Get("q"))
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

// publicTerm is a typed search term as a page or an address may show it,
// trimmed: a whole credential is its key's public prefix (which finds
// that key), and any credential within other text is cut to its public
// prefix, so that no page echoes a secret.
func publicTerm(s string) string {
	s = strings.TrimSpace(s)
	if c, err := credential.Parse(s); err == nil {
		return c.Prefix
	}
	return credential.RedactText(s)
}

// searchPath is where every search form posts. A search box may be given
// a credential (pasted to find its key), and a GET form would put it in
// the address, so in the browser's history and in any proxy's log; the
// form posts instead, with the session's CSRF token, and is sent on (303)
// to its list's address with the publicTerm of each of its fields. A
// term is cut one byte past store.MaxSearch, so the address stays short
// and the list still says the term is too long.
const searchPath = "/console/search"

// searchLists are the lists a search form names in its list field: each
// one's address and the fields its form sends.
var searchLists = map[string]struct {
	path   string
	fields []string
}{
	"keys":   {"/console/developers", []string{"q", "status"}},
	"audit":  {"/console/developers/audit", []string{"q"}},
	"logs":   {logsPath, []string{"id", "key", "status", "route", "range", "from", "to"}},
	"agents": {"/console/agents", []string{"q"}},
	"users":  {"/console/users", []string{"q"}},
}

// handleSearch sends a search form on to its list, no credential in the
// address. The list checks the role and the terms, as for a link.
func handleSearch(_ http.ResponseWriter, r *http.Request, _ *session) error {
	l, ok := searchLists[r.PostForm.Get("list")]
	if !ok {
		return errNotFound
	}
	keep := url.Values{}
	for _, name := range l.fields {
		v := publicTerm(r.PostForm.Get(name))
		keep.Set(name, v[:min(len(v), store.MaxSearch+1)])
	}
	return seeOther(linker(l.path, keep)(store.Cursor{}))
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
