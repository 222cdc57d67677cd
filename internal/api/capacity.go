package api

import (
	"net/http"
	"sync"

	"github.com/agentapi/agentapi/internal/domain"
)

// Defaults of Config.MaxModelCalls and Config.MaxModelCallsPerAccount
// (docs/api.md, Questions in progress).
const (
	DefaultMaxModelCalls           = 256
	DefaultMaxModelCallsPerAccount = 8
)

// modelCalls counts the questions in progress, per account and on the
// instance: one past either cap is refused before its model call and
// before its Idempotency-Key is reserved.
type modelCalls struct {
	mu                   sync.Mutex
	perAccount           map[string]int
	total                int
	maxAccount, maxTotal int
}

func newModelCalls(maxTotal, maxAccount int) *modelCalls {
	if maxTotal <= 0 {
		maxTotal = DefaultMaxModelCalls
	}
	if maxAccount <= 0 {
		maxAccount = DefaultMaxModelCallsPerAccount
	}
	return &modelCalls{perAccount: make(map[string]int), maxAccount: maxAccount, maxTotal: maxTotal}
}

// take counts a question of account in, or returns its refusal.
func (m *modelCalls) take(account string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.perAccount[account] >= m.maxAccount:
		return &retryLater{status: http.StatusTooManyRequests, after: 1, err: domain.Errorf(domain.CodeRateLimitExceeded,
			"Too many questions in progress for this account (at most %d at once); retry after 1 second.", m.maxAccount)}
	case m.total >= m.maxTotal:
		return busy("The service is answering as many questions as it can at once; retry after 1 second.")
	}
	m.perAccount[account]++
	m.total++
	return nil
}

func (m *modelCalls) done(account string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.perAccount[account]--; m.perAccount[account] <= 0 {
		delete(m.perAccount, account)
	}
	m.total--
}

// modelSlot runs next as one of the questions in progress, or refuses it.
func (s *Server) modelSlot(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		account := authFrom(r.Context()).key.AccountID
		if err := s.models.take(account); err != nil {
			return err
		}
		defer s.models.done(account)
		return next(w, r)
	}
}
