package api

import (
	"cmp"
	"net/http"

	"github.com/agentapi/agentapi/internal/agents"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/questions"
	"github.com/agentapi/agentapi/internal/webhooks"
)

// routes lists the whole /v1 API: method, path, scope, handler. Anything
// else under /v1 is 404 not_found, after authentication and rate limiting.
func (s *Server) routes(mux *http.ServeMux, cfg Config) {
	read, write, query := domain.ScopeAgentsRead, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery
	agentSvc := agents.New(s.store, s.now).WithListCache(cmp.Or(cfg.ListCache, agents.NewListCache()), s.fresh)
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
	mux.Handle("POST /v1/ai-agents", s.serve(s.scoped(write, s.creator(s.withBody(s.idempotent(evented(handleCreateAgent(agentSvc))))))))
	mux.Handle("GET /v1/ai-agents/{agent_id}", s.serve(s.scoped(read, s.agentRoute(handleGetAgent(agentSvc)))))
	mux.Handle("PATCH /v1/ai-agents/{agent_id}", s.serve(s.scoped(write, s.agentRoute(s.withBody(evented(handleUpdateAgent(agentSvc)))))))
	mux.Handle("PUT /v1/ai-agents/{agent_id}/enabled", s.serve(s.scoped(write, s.agentRoute(s.withBody(evented(handleSetEnabled(agentSvc)))))))
	mux.Handle("GET /v1/ai-agents/{agent_id}/stats", s.serve(s.scoped(read, s.agentRoute(handleAgentStats(agentSvc)))))
	mux.Handle("POST /v1/ai-agents/{agent_id}/questions", s.serve(s.scoped(query, s.agentRoute(s.modelSlot(s.withBody(s.idempotent(handleAsk(askSvc, s.log, keepAlive))))))))

	s.webhookRoutes(mux, cfg)

	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, notFoundRoute(r))
	}))
}

// webhookRoutes lists the events and webhook endpoint routes
// (docs/webhooks.md): each needs webhooks:manage; managing endpoints also
// needs a key not restricted to agents.
func (s *Server) webhookRoutes(mux *http.ServeMux, cfg Config) {
	manage := domain.ScopeWebhooksManage
	svc := cfg.Webhooks
	if svc == nil {
		svc = webhooks.New(s.store, s.now, nil)
	}
	cursors := newCursorSigner(cfg.CursorKey)
	ep := func(h handlerFunc) http.Handler { return s.serve(s.scoped(manage, endpointManager(evented(h)))) }

	mux.Handle("GET /v1/events", s.serve(s.scoped(manage, handleListEvents(s.store, cursors))))
	mux.Handle("GET /v1/events/{event_id}", s.serve(s.scoped(manage, handleGetEvent(s.store))))
	mux.Handle("GET /v1/webhook-endpoints", ep(handleListEndpoints(svc, cursors)))
	mux.Handle("POST /v1/webhook-endpoints", ep(s.withBody(s.idempotent(handleCreateEndpoint(svc)))))
	mux.Handle("GET /v1/webhook-endpoints/{endpoint_id}", ep(handleGetEndpoint(svc)))
	mux.Handle("PATCH /v1/webhook-endpoints/{endpoint_id}", ep(s.withBody(handleUpdateEndpoint(svc))))
	mux.Handle("DELETE /v1/webhook-endpoints/{endpoint_id}", ep(handleDeleteEndpoint(svc)))
	mux.Handle("POST /v1/webhook-endpoints/{endpoint_id}/rotate-secret", ep(s.withBody(handleRotateSecret(svc))))
	mux.Handle("POST /v1/webhook-endpoints/{endpoint_id}/test", ep(handleTestEndpoint(svc)))
	mux.Handle("GET /v1/webhook-endpoints/{endpoint_id}/deliveries", ep(handleListAttempts(svc, cursors)))
	mux.Handle("POST /v1/webhook-endpoints/{endpoint_id}/deliveries/{event_id}/resend", ep(handleResend(svc)))
}
