package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Page sizes of collection listings (the contract's Limits table).
const (
	DefaultPageSize = 30
	MaxPageSize     = 100
)

// agentItem is an agent in a list: exactly the contract's four fields.
type agentItem struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Enabled   bool   `json:"enabled"`
	CreatedAt string `json:"created_at"`
}

// agentRecord is an agent in a single-agent response (docs/api.md, Resources).
type agentRecord struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Enabled      bool   `json:"enabled"`
	CreatedAt    string `json:"created_at"`
	Instructions string `json:"instructions"`
	UpdatedAt    string `json:"updated_at"`
}

func toRecord(a domain.Agent) agentRecord {
	return agentRecord{
		ID: a.ID, Name: a.Name, Enabled: a.Enabled, CreatedAt: formatTime(a.CreatedAt),
		Instructions: a.Instructions, UpdatedAt: formatTime(a.UpdatedAt),
	}
}

type single struct {
	Data any `json:"data"`
}

type collection struct {
	Data any  `json:"data"`
	Meta meta `json:"meta"`
}

type meta struct {
	Limit   int     `json:"limit"`
	Next    *string `json:"next"`
	HasMore bool    `json:"has_more"`
}

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
	if !rfc3339Form(s) {
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

// rfc3339Form reports whether s has RFC 3339's date-time form (section
// 5.6): full-date "T" partial-time time-offset, a fraction of one digit or
// more after a dot, and an offset of Z or ±hh:mm with hh ≤ 23 and mm ≤ 59.
func rfc3339Form(s string) bool {
	digits := func(i, n int) bool {
		for j := i; j < i+n; j++ {
			if j >= len(s) || s[j] < '0' || s[j] > '9' {
				return false
			}
		}
		return true
	}
	if len(s) < 20 || !digits(0, 4) || s[4] != '-' || !digits(5, 2) || s[7] != '-' || !digits(8, 2) ||
		(s[10] != 'T' && s[10] != 't') || !digits(11, 2) || s[13] != ':' || !digits(14, 2) || s[16] != ':' || !digits(17, 2) {
		return false
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	switch rest := s[i:]; {
	case rest == "Z" || rest == "z":
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && digits(i+1, 2) && rest[3] == ':' && digits(i+4, 2):
		return rest[1:3] <= "23" && rest[4:6] <= "59"
	}
	return false
}

// ceilMilli rounds up to the store's millisecond precision, so that
// updated_at >= updated_since never admits a record from before it.
func ceilMilli(t time.Time) time.Time {
	tr := t.Truncate(time.Millisecond)
	if tr.Before(t) {
		tr = tr.Add(time.Millisecond)
	}
	return tr
}

func (s *Server) handleListAgents() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := authFrom(r.Context())
		var p problems
		q := p.query(r, "limit", "next", "updated_since")
		rawLimit, given := q["limit"]
		limit := parseLimit(rawLimit, given)

		sq := store.AgentQuery{AccountID: a.key.AccountID, Limit: limit + 1}
		if a.key.Restricted() {
			sq.OnlyKeyID = a.key.ID
		}
		filter, filterOK := "", true
		if v, ok := q["updated_since"]; ok {
			t, ok := parseTimestamp(v)
			if !ok {
				filterOK = false
				p.add("updated_since", domain.CodeInvalidValue,
					"updated_since must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z.")
			} else {
				t = ceilMilli(t)
				sq.UpdatedSince = &t
				filter = "updated_since=" + strconv.FormatInt(t.UnixMilli(), 10)
			}
		}
		if v, ok := q["next"]; ok {
			// A cursor is bound to its query's filter: under an invalid
			// filter only its form can be checked, so that errors still
			// lists a cursor that could belong to no query at all.
			var c cursor
			if filterOK {
				c, ok = decodeCursor(s.cursors, a.key.AccountID, filter, v)
			} else {
				_, _, ok = splitCursor(v)
			}
			switch {
			case !ok:
				p.add("next", domain.CodeInvalidValue,
					"next is not a cursor of this query; copy meta.next from the previous page of the same query.")
			case filterOK:
				sq.AfterCreatedAt, sq.AfterID = c.createdAt, c.id
			}
		}
		if err := p.err(); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		agents, err := s.store.ListAgentItems(r.Context(), sq)
		if err != nil {
			writeError(w, r, s.log, fmt.Errorf("list agents: %w", err))
			return
		}
		m := meta{Limit: limit, HasMore: len(agents) > limit}
		if m.HasMore {
			agents = agents[:limit]
			last := agents[len(agents)-1]
			next := encodeCursor(s.cursors, a.key.AccountID, filter, cursor{createdAt: last.CreatedAt, id: last.ID})
			m.Next = &next
		}
		// The items are agentItem's four fields, appended straight from
		// the store's items (json.go): no reflection, one pooled buffer.
		buf := getAppendBuf()
		defer putAppendBuf(buf)
		*buf = appendAgentPage(*buf, agents, m)
		writeJSONBytes(w, http.StatusOK, *buf)
	})
}

func (s *Server) handleCreateAgent() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := authFrom(r.Context())
		if a.key.Restricted() {
			writeError(w, r, s.log, domain.Errorf(domain.CodeAccessDenied,
				"This API key is restricted to specific AI agents and cannot create agents."))
			return
		}
		var p problems
		p.query(r)
		obj := p.object(w, r, "name", "instructions")
		name, _ := p.name(obj, "name", true)
		instructions, _ := p.text(obj, "instructions", MaxInstructionsLength, false)
		if err := p.err(); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		now := a.now.Truncate(time.Millisecond)
		ag := domain.Agent{
			ID: domain.NewID(domain.PrefixAgent, now), AccountID: a.key.AccountID,
			Name: name, Instructions: instructions, Enabled: true, CreatedAt: now, UpdatedAt: now,
		}
		if err := s.store.CreateAgent(r.Context(), ag); err != nil {
			writeError(w, r, s.log, duplicateName(err, name, a.key))
			return
		}
		w.Header().Set("Location", "/v1/ai-agents/"+ag.ID)
		writeJSON(w, http.StatusCreated, single{Data: toRecord(ag)})
	})
}

// duplicateName turns a store duplicate into the contract's 409, which a
// client may adopt as success through existing_id. A key restricted to
// some agents never learns the id of another (docs/api.md, Agent restriction).
func duplicateName(err error, name string, key domain.APIKey) error {
	var dup *domain.DuplicateError
	if !errors.As(err, &dup) {
		return fmt.Errorf("store agent: %w", err)
	}
	msg := fmt.Sprintf("An AI agent named %q already exists in this account.", name)
	id := dup.ExistingID
	if !key.AllowsAgent(id) {
		id = ""
		msg = fmt.Sprintf("An AI agent named %q already exists in this account; its id is not shown, as this API key is restricted to other AI agents.", name)
	}
	return &domain.Error{
		Code: domain.CodeDuplicateValue, Message: msg, ExistingID: id,
		Fields: []domain.FieldError{{Field: "name", Code: domain.CodeDuplicateValue, Message: msg}},
	}
}

// noQuery refuses any query parameter on a route that takes none; false
// when it has answered.
func (s *Server) noQuery(w http.ResponseWriter, r *http.Request) bool {
	var p problems
	p.query(r)
	if err := p.err(); err != nil {
		writeError(w, r, s.log, err)
		return false
	}
	return true
}

// pathAgent validates a read route on one agent and loads the agent its
// path names from the caller's account; false when it has answered.
func (s *Server) pathAgent(w http.ResponseWriter, r *http.Request) (domain.Agent, bool) {
	if !s.noQuery(w, r) {
		return domain.Agent{}, false
	}
	id := r.PathValue("agent_id")
	ag, err := s.store.GetAgent(r.Context(), authFrom(r.Context()).key.AccountID, id)
	if err != nil {
		writeError(w, r, s.log, agentErr(err, id))
		return domain.Agent{}, false
	}
	return ag, true
}

func (s *Server) handleGetAgent() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ag, ok := s.pathAgent(w, r); ok {
			writeJSON(w, http.StatusOK, single{Data: toRecord(ag)})
		}
	})
}

func agentErr(err error, id string) error {
	if errors.Is(err, domain.ErrNotFound) {
		return agentNotFound(id)
	}
	return err
}

// touched moves updated_at forward for a real change, even if this
// instance's clock is behind the one that wrote it last.
func touched(ag *domain.Agent, now time.Time) {
	now = now.Truncate(time.Millisecond)
	if !now.After(ag.UpdatedAt) {
		now = ag.UpdatedAt.Add(time.Millisecond)
	}
	ag.UpdatedAt = now
}

func (s *Server) handleSetEnabled() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := authFrom(r.Context())
		var p problems
		p.query(r)
		obj := p.object(w, r, "enabled")
		enabled, _ := p.boolean(obj, "enabled")
		if err := p.err(); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		id := r.PathValue("agent_id")
		ag, err := s.store.UpdateAgent(r.Context(), a.key.AccountID, id, func(ag *domain.Agent) (bool, error) {
			if ag.Enabled == enabled {
				return false, nil
			}
			ag.Enabled = enabled
			touched(ag, a.now)
			return true, nil
		})
		if err != nil {
			writeError(w, r, s.log, agentErr(err, id))
			return
		}
		writeJSON(w, http.StatusOK, single{Data: toRecord(ag)})
	})
}

func (s *Server) handleUpdateAgent() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := authFrom(r.Context())
		var p problems
		p.query(r)
		obj := p.object(w, r, "name", "instructions")
		for i, f := range p.fields {
			if f.Field == "enabled" && f.Code == domain.CodeInvalidField {
				p.fields[i].Message = "enabled is not changed here; use PUT /v1/ai-agents/{agent_id}/enabled."
			}
		}
		name, setName := p.name(obj, "name", false)
		instructions, setInstructions := p.text(obj, "instructions", MaxInstructionsLength, false)
		if err := p.err(); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		id := r.PathValue("agent_id")
		ag, err := s.store.UpdateAgent(r.Context(), a.key.AccountID, id, func(ag *domain.Agent) (bool, error) {
			changed := false
			if setName && name != ag.Name {
				ag.Name, changed = name, true
			}
			if setInstructions && instructions != ag.Instructions {
				ag.Instructions, changed = instructions, true
			}
			if changed {
				touched(ag, a.now)
			}
			return changed, nil
		})
		if err != nil {
			if !errors.Is(err, domain.ErrNotFound) {
				err = duplicateName(err, name, a.key)
			}
			writeError(w, r, s.log, agentErr(err, id))
			return
		}
		writeJSON(w, http.StatusOK, single{Data: toRecord(ag)})
	})
}
