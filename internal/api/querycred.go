package api

import (
	"net/url"
	"slices"
	"strings"
)

// queryCredentialNames are refused in the query string before anything else.
var queryCredentialNames = []string{"authorization", "access_token", "api_key", "apikey", "token"}

func hasQueryCredential(raw string) bool {
	for raw != "" {
		var piece string
		// "&" and ";" both end a parameter here: a server or proxy that
		// splits on ";" must not see a credential this check missed.
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			piece, raw = raw[:i], raw[i+1:]
		} else {
			piece, raw = raw, ""
		}
		name, _, _ := strings.Cut(piece, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if slices.ContainsFunc(queryCredentialNames, func(c string) bool { return strings.EqualFold(name, c) }) {
			return true
		}
	}
	return false
}
