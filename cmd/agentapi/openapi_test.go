package main

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/agentapi/agentapi/internal/api"
)

// TestServeOpenAPI: `agentapi serve` publishes the API description at
// /v1/openapi.json without a key, as JSON with an ETag.
func TestServeOpenAPI(t *testing.T) {
	s := startServer(t, nil, "--db", filepath.Join(t.TempDir(), "openapi.db"))
	resp, err := http.Get(s.base + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("ETag") == "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if !bytes.Equal(body, api.OpenAPIDocument()) {
		t.Fatal("serve does not serve the embedded document")
	}
}
