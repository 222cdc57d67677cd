package api

import (
	"cmp"
	"net/http"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/questions"
)

// routes lists the whole /v1 API: method, path, scope, handler. Anything
// else under /v1 is 404 not_found, after authentication and rate limiting.
func (s *Server) routes(mux *http.ServeMux, cfg Config) {
	read, write, query := domain.ScopeAgentsRead, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery
	agentSvc := agents.New(s.store, s.now).WithListCache(cmp.Or(cfg.ListCache, agents.NewListCache()))
	var model questions.Model // a nil *llm.Client must stay a nil Model: no model configured
	if cfg.LLM != nil {
		model = cfg.LLM
	}
	askSvc := questions.New(s.store, model, s.now)
	keepAlive := cfg.StreamKeepAlive
	if keepAlive <= 0 {
		keepAlive = DefaultStreamKeepAlive
	}

	mux.Handle("GET /v1/me", s.serve(handleMe))
	mux.Handle("GET /v1/ai-agents", s.serve(s.scoped(read, handleListAgents(agentSvc, newCursorSigner(cfg.CursorKey)))))
	mux.Handle("POST /v1/ai-agents", s.serve(s.scoped(write, s.creator(s.withBody(s.idempotent(handleCreateAgent(agentSvc)))))))
	mux.Handle("GET /v1/ai-agents/{agent_id}", s.serve(s.scoped(read, s.agentRoute(handleGetAgent(agentSvc)))))
	mux.Handle("PATCH /v1/ai-agents/{agent_id}", s.serve(s.scoped(write, s.agentRoute(s.withBody(handleUpdateAgent(agentSvc))))))
	mux.Handle("PUT /v1/ai-agents/{agent_id}/enabled", s.serve(s.scoped(write, s.agentRoute(s.withBody(handleSetEnabled(agentSvc))))))
	mux.Handle("GET /v1/ai-agents/{agent_id}/stats", s.serve(s.scoped(read, s.agentRoute(handleAgentStats(agentSvc)))))
	mux.Handle("POST /v1/ai-agents/{agent_id}/questions", s.serve(s.scoped(query, s.agentRoute(s.modelSlot(s.withBody(s.idempotent(handleAsk(askSvc, s.log, keepAlive))))))))

	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, notFoundRoute(r))
	}))
}
