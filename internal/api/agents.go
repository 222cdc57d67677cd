package api

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// Page sizes of collection listings (the contract's Limits table).
const (
	DefaultPageSize = 30
	MaxPageSize     = 100
)

// toRecord is an agent in a single-agent response (docs/api.md, Resources).
func toRecord(a domain.Agent) wire.Agent {
	return wire.Agent{
		ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: wire.Time(a.CreatedAt),
		Instructions: a.Instructions, UpdatedAt: wire.Time(a.UpdatedAt),
	}
}

type single struct {
	Data any `json:"data"`
}

type meta = wire.Meta

// parseLimit applies the contract's rules: ASCII digits only (leading zeros
// allowed) with a positive value, clamped to 100; anything else falls back to 30.
func parseLimit(s string, given bool) int {
	if !given || s == "" {
		return DefaultPageSize
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return DefaultPageSize
		}
		if n <= MaxPageSize { // stop growing: any larger value clamps, however many digits
			n = n*10 + int(c-'0')
		}
	}
	switch {
	case n == 0:
		return DefaultPageSize
	case n > MaxPageSize:
		return MaxPageSize
	}
	return n
}

// parseTimestamp accepts RFC 3339 with Z or an offset. time.Parse only
// approximates RFC 3339's grammar: it also takes a comma before the
// fraction and offsets such as +24:00 or +23:60, and refuses the lower-case
// t and z that RFC 3339 allows. So the form is checked here first, and Go
// parses the date and time (the calendar: no February 30th).
func parseTimestamp(s string) (time.Time, bool) {
	if !rfc3339Form.MatchString(s) {
		return time.Time{}, false
	}
	b := []byte(s)
	b[10] = 'T'
	if last := len(b) - 1; b[last] == 'z' {
		b[last] = 'Z'
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// rfc3339Form is RFC 3339's date-time form (section 5.6): full-date "T"
// partial-time time-offset, a fraction of one digit or more after a dot,
// and an offset of Z or ±hh:mm with hh ≤ 23 and mm ≤ 59. (\d is ASCII.)
var rfc3339Form = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

// ceilMilli rounds up to the store's millisecond precision, so that
// updated_at >= updated_since never admits a record from before it.
func ceilMilli(t time.Time) time.Time {
	return t.Add(time.Millisecond - 1).Truncate(time.Millisecond)
}

// agentActor is the caller of an agent route: its key, whose restriction
// the agents service applies.
func agentActor(r *http.Request) agents.Actor {
	k := authFrom(r.Context()).key
	return agents.Actor{AccountID: k.AccountID, Key: &k}
}

// listQuery reads the agent list's query string: its page (limit + 1 rows
// after the cursor, the filter) and the filter as cursors are bound to it.
func listQuery(r *http.Request, cursors *cursorSigner, account string) (page agents.Page, limit int, filter string, _ error) {
	var p problems
	q := p.query(r, "limit", "next", "updated_since")
	rawLimit, given := q["limit"]
	limit = parseLimit(rawLimit, given)
	page = agents.Page{Limit: limit + 1, Version: authFrom(r.Context()).listVersion}
	filterOK := true
	if v, ok := q["updated_since"]; ok {
		t, ok := parseTimestamp(v)
		if filterOK = ok; !ok {
			p.add("updated_since", domain.CodeInvalidValue,
				"updated_since must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z.")
		} else {
			t = ceilMilli(t)
			page.UpdatedSince = &t
			filter = "updated_since=" + strconv.FormatInt(t.UnixMilli(), 10)
		}
	}
	if v, ok := q["next"]; ok {
		// A cursor is bound to its query's filter: under an invalid
		// filter only its form can be checked, so that errors still
		// lists a cursor that could belong to no query at all.
		var c cursor
		if filterOK {
			c, ok = decodeCursor(cursors, account, filter, v)
			page.AfterCreatedAt, page.AfterID = c.createdAt, c.id
		} else {
			_, _, ok = splitCursor(v)
		}
		if !ok {
			p.add("next", domain.CodeInvalidValue,
				"next is not a cursor of this query; copy meta.next from the previous page of the same query.")
		}
	}
	return page, limit, filter, p.err()
}

func handleListAgents(svc *agents.Service, cursors *cursorSigner) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		actor := agentActor(r)
		page, limit, filter, err := listQuery(r, cursors, actor.AccountID)
		if err != nil {
			return err
		}
		items, err := svc.List(r.Context(), actor, page)
		if err != nil {
			return err
		}
		m := meta{Limit: limit, HasMore: len(items) > limit}
		if m.HasMore {
			items = items[:limit]
			last := items[len(items)-1]
			next := encodeCursor(cursors, actor.AccountID, filter, cursor{createdAt: last.CreatedAt, id: last.ID})
			m.Next = &next
		}
		writeAgentPage(w, items, m)
		return nil
	}
}

// agentFields decodes the body of a create or an update: name and
// instructions, each given or not.
func agentFields(w http.ResponseWriter, r *http.Request, nameRequired bool) (agents.Fields, error) {
	var p problems
	p.query(r)
	obj := p.object(w, r, "name", "instructions")
	if !nameRequired {
		for i, f := range p.fields {
			if f.Field == "enabled" && f.Code == domain.CodeInvalidField {
				p.fields[i].Message = "enabled is not changed here; use PUT /v1/ai-agents/{agent_id}/enabled."
			}
		}
	}
	var f agents.Fields
	if name, ok := p.name(obj, "name", nameRequired); ok {
		f.Name = &name
	}
	if instructions, ok := p.text(obj, "instructions", domain.MaxInstructionsLength, false); ok {
		f.Instructions = &instructions
	}
	return f, p.err()
}

func handleCreateAgent(svc *agents.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		f, err := agentFields(w, r, true)
		if err != nil {
			return err
		}
		ag, err := svc.Create(r.Context(), agentActor(r), f)
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/v1/ai-agents/"+ag.ID)
		writeJSON(w, http.StatusCreated, single{Data: toRecord(ag)})
		return nil
	}
}

// noQuery refuses any query parameter on a route that takes none.
func noQuery(r *http.Request) error {
	var p problems
	p.query(r)
	return p.err()
}

// writeAgent answers 200 with ag, or returns err.
func writeAgent(w http.ResponseWriter, ag domain.Agent, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, single{Data: toRecord(ag)})
	return nil
}

func handleGetAgent(svc *agents.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noQuery(r); err != nil {
			return err
		}
		ag, err := svc.Get(r.Context(), agentActor(r), r.PathValue("agent_id"))
		return writeAgent(w, ag, err)
	}
}

func handleSetEnabled(svc *agents.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var p problems
		p.query(r)
		obj := p.object(w, r, "enabled")
		enabled, _ := p.boolean(obj, "enabled")
		if err := p.err(); err != nil {
			return err
		}
		ag, err := svc.SetEnabled(r.Context(), agentActor(r), r.PathValue("agent_id"), enabled)
		return writeAgent(w, ag, err)
	}
}

func handleUpdateAgent(svc *agents.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		f, err := agentFields(w, r, false)
		if err != nil {
			return err
		}
		ag, err := svc.Update(r.Context(), agentActor(r), r.PathValue("agent_id"), f)
		return writeAgent(w, ag, err)
	}
}
