package api

import (
	"net/http"

	"github.com/agentapi/agentapi/internal/domain"
)

// routes lists the whole /v1 API: method, path, scope, handler. Anything
// else under /v1 is 404 not_found, after authentication and rate limiting.
func (s *Server) routes(mux *http.ServeMux) {
	read, write, query := domain.ScopeAgentsRead, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery

	mux.Handle("GET /v1/me", s.handleMe())
	mux.Handle("GET /v1/ai-agents", s.scoped(read, s.handleListAgents()))
	mux.Handle("POST /v1/ai-agents", s.scoped(write, s.handleCreateAgent()))
	mux.Handle("GET /v1/ai-agents/{agent_id}", s.scoped(read, s.agentRoute(s.handleGetAgent())))
	mux.Handle("PATCH /v1/ai-agents/{agent_id}", s.scoped(write, s.agentRoute(s.handleUpdateAgent())))
	mux.Handle("PUT /v1/ai-agents/{agent_id}/enabled", s.scoped(write, s.agentRoute(s.handleSetEnabled())))
	mux.Handle("GET /v1/ai-agents/{agent_id}/stats", s.scoped(read, s.agentRoute(s.handleAgentStats())))
	mux.Handle("POST /v1/ai-agents/{agent_id}/questions", s.scoped(query, s.agentRoute(s.handleAsk())))

	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, notFoundRoute(r))
	}))
}
