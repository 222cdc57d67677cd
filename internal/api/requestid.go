package api

import "context"

type ctxKey int

// ctxLogAttrs holds a request's recorder (observe), its one context value.
const ctxLogAttrs ctxKey = 0

// requestID is the id observe gave the request of ctx ("" outside one).
func requestID(ctx context.Context) string {
	if rec, _ := ctx.Value(ctxLogAttrs).(*recorder); rec != nil {
		return rec.id
	}
	return ""
}
