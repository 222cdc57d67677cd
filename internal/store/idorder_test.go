package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestAgentsOfOneMillisecondListInCreationOrder: agents created one after
// another by one process at the same instant (a clock that does not move,
// as a fast client sees within a millisecond) list in creation order,
// page after page, on every engine.
func TestAgentsOfOneMillisecondListInCreationOrder(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		acct := storetest.Account(t, s)
		var made []string
		for i := range 200 {
			made = append(made, storetest.Agent(t, s, acct.ID, fmt.Sprint("same ms ", i), t0).ID)
		}
		listed := agentsOfOneMillisecondList(t, s, acct.ID)
		if !slices.Equal(listed, made) {
			agentsOfOneMillisecondReport(t, listed, made)
		}
	})
}

// agentsOfOneMillisecondList lists the account's agents 70 a page, page
// after page, and returns their ids.
func agentsOfOneMillisecondList(t *testing.T, s *store.Store, accountID string) []string {
	t.Helper()
	var listed []string
	q := store.AgentQuery{AccountID: accountID, Limit: 70}
	for {
		page, err := listBoth(t, s, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			listed = append(listed, a.ID)
		}
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.AfterCreatedAt, q.AfterID = last.CreatedAt, last.ID
	}
	return listed
}

// agentsOfOneMillisecondReport fails the test where listed first differs
// from made, or on their lengths.
func agentsOfOneMillisecondReport(t *testing.T, listed, made []string) {
	t.Helper()
	for i := range min(len(listed), len(made)) {
		if listed[i] != made[i] {
			t.Fatalf("%d agents listed; at position %d is %s, created at position %d", len(listed), i, listed[i], slices.Index(made, listed[i]))
		}
	}
	t.Fatalf("%d agents listed, %d created", len(listed), len(made))
}
