package api

import (
	"sync"

	"github.com/agentapi/agentapi/internal/apidocs"
)

// apiDocs is GET /docs, the API reference rendered from openapi.json: once
// per process, as the document is part of the binary.
var apiDocs = sync.OnceValues(func() (*apidocs.Handler, error) { return apidocs.New(openAPIDocument) })
