package api

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// openAPIDocument is the OpenAPI 3.1 description of /v1. It is written by
// hand and kept honest by the tests: every response the HTTP test suite
// receives is validated against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns the OpenAPI 3.1 description of /v1 (a copy).
func OpenAPIDocument() []byte { return append([]byte(nil), openAPIDocument...) }

// openAPIETag is computed once: the document is part of the binary.
var openAPIETag = func() string {
	sum := sha256.Sum256(openAPIDocument)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// serveOpenAPI serves the embedded document. It needs no key (dispatch
// routes it before authentication): it is public, the same for everyone,
// and clients fetch it to learn how to authenticate. Clients may cache it
// briefly and revalidate with If-None-Match.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	r.Context().Value(ctxLogAttrs).(*recorder).route = "GET /v1/openapi.json" // in metrics and the request log
	h := w.Header()
	h.Set("ETag", openAPIETag)
	h.Set("Cache-Control", "public, max-age=300")
	if etagMatches(r.Header.Values("If-None-Match"), openAPIETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(openAPIDocument)
	}
}

// etagMatches applies If-None-Match's weak comparison (RFC 9110 13.1.2).
func etagMatches(fields []string, etag string) bool {
	for _, f := range fields {
		for _, tag := range strings.Split(f, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == "*" || tag == etag {
				return true
			}
		}
	}
	return false
}
