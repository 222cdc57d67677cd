package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/store"
)

// TestMain serves the real API on a fresh SQLite file for the examples,
// and gives them AGENTAPI_URL and AGENTAPI_KEY as a user's shell would.
func TestMain(m *testing.M) {
	os.Exit(runWithExampleServer(m))
}

func runWithExampleServer(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentapi-client-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "example.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	s, err := startAPI(st, time.Now)
	if err != nil {
		log.Fatal(err)
	}
	defer s.close()
	k, err := s.mint(s.account, s.owner, nil, allScopes...)
	if err != nil {
		log.Fatal(err)
	}
	os.Setenv("AGENTAPI_URL", s.URL)
	os.Setenv("AGENTAPI_KEY", k.Credential)
	return m.Run()
}

// Listing follows every page: here 5 agents in pages of 2.
func ExampleClient_Agents() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("AGENTAPI_URL"), os.Getenv("AGENTAPI_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"Billing", "Sales", "Support", "Onboarding", "Returns"} {
		if _, err := c.CreateAgent(ctx, client.NewAgent{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	for a, err := range c.Agents(ctx, client.ListOptions{Limit: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(a.Name, a.Enabled)
	}
	// The order is creation order, but agents made within one millisecond
	// are ordered by id, so this example does not depend on it.

	// Unordered output:
	// Billing true
	// Sales true
	// Support true
	// Onboarding true
	// Returns true
}

func Example() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("AGENTAPI_URL"), os.Getenv("AGENTAPI_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	me, err := c.Me(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(me.Scopes, me.RateLimitPerMinute, me.ExpiresAt == nil)

	a, err := c.CreateAgent(ctx, client.NewAgent{Name: "Helpdesk", Instructions: "Answer briefly."})
	if err != nil {
		log.Fatal(err)
	}
	a, err = c.DisableAgent(ctx, a.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Name, a.Enabled)
	// Output:
	// [aiagents:read aiagents:write aiagents:query] 120 true
	// Helpdesk false
}

// Errors are *client.Error, with the contract's code.
func ExampleError() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("AGENTAPI_URL"), os.Getenv("AGENTAPI_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.CreateAgent(ctx, client.NewAgent{Name: "   "})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.StatusCode, e.Code)
		for _, f := range e.Errors {
			fmt.Println(f.Field, f.Code)
		}
	}
	_, err = c.GetAgent(ctx, "agt_does_not_exist")
	fmt.Println(client.IsCode(err, client.CodeNotFound))
	// Output:
	// 400 invalid_value
	// name invalid_value
	// true
}

// AdoptExisting makes a create safe to repeat: the second call returns the
// agent the first one made.
func ExampleNewAgent_adoptExisting() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("AGENTAPI_URL"), os.Getenv("AGENTAPI_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	first, err := c.CreateAgent(ctx, client.NewAgent{Name: "Invoices", AdoptExisting: true})
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.CreateAgent(ctx, client.NewAgent{Name: "invoices", AdoptExisting: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Adopted, again.Adopted, again.ID == first.ID, again.Name)

	// Without it, the duplicate is an error carrying the existing id.
	_, err = c.CreateAgent(ctx, client.NewAgent{Name: "INVOICES"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.ExistingID == first.ID)
	}
	// Output:
	// false true true Invoices
	// duplicate_value true
}

// UpdatedSince lists only the agents changed at or after a time.
func ExampleListOptions_updatedSince() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("AGENTAPI_URL"), os.Getenv("AGENTAPI_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	a, err := c.CreateAgent(ctx, client.NewAgent{Name: "Triage"})
	if err != nil {
		log.Fatal(err)
	}
	// Anything changed from now on; UpdatedSince is inclusive.
	since := time.Now().Add(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	instructions := "Route every question to a human."
	if _, err := c.UpdateAgent(ctx, a.ID, client.AgentUpdate{Instructions: &instructions}); err != nil {
		log.Fatal(err)
	}
	for changed, err := range c.Agents(ctx, client.ListOptions{UpdatedSince: since}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(changed.Name)
	}
	// Output:
	// Triage
}
