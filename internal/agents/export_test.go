package agents

import (
	"context"

	"github.com/agentapi/agentapi/internal/store"
)

// ListItems is listItems: a page through the list cache, under v.
func (s *Service) ListItems(ctx context.Context, q store.AgentQuery, v ListVersion) ([]store.AgentItem, error) {
	return s.listItems(ctx, q, v)
}
