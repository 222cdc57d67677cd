package console

import (
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
)

// The key form's scopes as a resource × access table (docs/console.md,
// Create key): a row per resource, a column per access, a box where the
// vocabulary has that scope. Scopes do not imply one another, so each box
// stands alone.

// accessColumns are the table's columns: the actions of the vocabulary.
var accessColumns = []string{"read", "write", "query", "manage"}

// resourceNames are the resources as people read them, in the order of
// domain.Scopes.
var resourceNames = map[string]string{
	"aiagents": "AI agents",
	"staff":    "Staff",
	"helpdesk": "Helpdesk",
	"settings": "Settings",
	"webhooks": "Webhooks and events",
}

// accessRow is a resource: a cell per column, empty where it has no such
// scope; Reserved when its scopes grant nothing callable yet.
type accessRow struct {
	Resource, Name string
	Reserved       bool
	Cells          []option
}

// accessTable lays scopes (the form's options, ticked or not) out as the
// table: resources in the vocabulary's order.
func accessTable(scopes []option) ([]accessRow, []string) {
	var rows []accessRow
	at := map[string]int{}
	for _, sc := range scopes {
		res, action, _ := strings.Cut(sc.Value, ":")
		i, ok := at[res]
		if !ok {
			i = len(rows)
			at[res] = i
			rows = append(rows, accessRow{Resource: res, Name: resourceNames[res], Reserved: true, Cells: make([]option, len(accessColumns))})
		}
		for c, col := range accessColumns {
			if col == action {
				rows[i].Cells[c] = sc
			}
		}
		rows[i].Reserved = rows[i].Reserved && sc.Reserved
	}
	return rows, accessColumns
}

// scopeNames are scopes as the form posts them.
func scopeNames(list []domain.Scope) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}
