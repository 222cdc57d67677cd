package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/agentapi/agentapi/client/webhook"
)

// handleDelivery is a receiver's endpoint: it reads the raw body (at most
// 1 MiB), verifies it before anything else, and only then trusts it.
func handleDelivery(secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			http.Error(w, "invalid signature", http.StatusBadRequest)
			return
		}
		// Deduplicate on webhook-id: a delivery may arrive more than once.
		fmt.Printf("event %s: %s\n", r.Header.Get(webhook.HeaderID), body)
		w.WriteHeader(http.StatusNoContent)
	})
}

// A receiver verifies a delivery in its http.Handler. Here the delivery is
// signed with Sign, as agentapi signs it, and handed to the handler.
func Example() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // as the console showed it
	h := handleDelivery(secret)

	send := func(body string) int {
		now := time.Now()
		sig, err := webhook.Sign(secret, "evt_2Zx8Qw", now, []byte(`{"type":"ai_agent.created"}`))
		if err != nil {
			panic(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/webhooks/agentapi", bytes.NewBufferString(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(webhook.HeaderID, "evt_2Zx8Qw")
		r.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		r.Header.Set(webhook.HeaderSignature, sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println("as signed:", send(`{"type":"ai_agent.created"}`))
	fmt.Println("altered:", send(`{"type":"ai_agent.deleted"}`))
	// Output:
	// event evt_2Zx8Qw: {"type":"ai_agent.created"}
	// as signed: 204
	// altered: 400
}
