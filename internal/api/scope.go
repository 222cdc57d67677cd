package api

import (
	"errors"
	"net/http"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/metrics"
)

func notFoundRoute(r *http.Request) error {
	if m := metrics.KnownMethod(r.Method); m != "" {
		return domain.Errorf(domain.CodeNotFound, "No endpoint %s %s.", m, credential.RedactText(r.URL.Path))
	}
	return domain.Errorf(domain.CodeNotFound, "No endpoint takes this method at %s.", credential.RedactText(r.URL.Path))
}

// scoped refuses the route unless the key holds scope (no inheritance).
func (s *Server) scoped(scope domain.Scope, next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !authFrom(r.Context()).key.HasScope(scope) {
			return domain.Errorf(domain.CodeAccessDenied,
				"This API key lacks the %s scope, which this endpoint requires.", scope)
		}
		return next(w, r)
	}
}

// creator refuses a key restricted to specific agents before anything
// else of a create runs: an Idempotency-Key is looked up only for a
// request that passed its key's scopes and restriction (decisions.md).
func (s *Server) creator(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := agentActor(r).MayCreate(); err != nil {
			return err
		}
		return next(w, r)
	}
}

// agentRoute enforces a key's agent restriction on routes naming an agent:
// an agent of the caller's account outside the list is 403, and an id not in
// the caller's account is 404 for every key, never 403.
func (s *Server) agentRoute(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		a := authFrom(r.Context())
		id := r.PathValue("agent_id")
		if !a.key.AllowsAgent(id) {
			if _, err := s.store.GetAgent(r.Context(), a.key.AccountID, id); err != nil {
				if errors.Is(err, domain.ErrNotFound) {
					err = agents.NotFound(id)
				}
				return err
			}
			return domain.Errorf(domain.CodeAccessDenied, "This API key is restricted to other AI agents.")
		}
		return next(w, r)
	}
}
