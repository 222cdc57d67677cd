package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/secretscan"
)

// handleSecretScanning answers POST /secret-scanning/github: a report of
// GitHub's secret-scanning partner programme (docs/secret-scanning.md).
// It needs no API key, so it counts against the address's limit of
// requests without one; the report must be signed by a key of ks. Every
// reported credential of ours that is active is revoked before the answer.
func (s *Server) handleSecretScanning(ks *secretscan.Keys, svc *keys.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.limitAnonymous(w, r, true) {
			return
		}
		keyID, sig := r.Header.Get(secretscan.HeaderKeyID), r.Header.Get(secretscan.HeaderSignature)
		if keyID == "" || sig == "" {
			writeError(w, r, s.log, domain.Errorf(domain.CodeInvalidCredentials,
				"A report must be signed: send the %s and %s headers.", secretscan.HeaderKeyID, secretscan.HeaderSignature))
			return
		}
		for _, v := range r.Header.Values("Content-Encoding") {
			if c := strings.TrimSpace(v); c != "" && !strings.EqualFold(c, "identity") {
				writeError(w, r, s.log, domain.Errorf(domain.CodeUnsupportedType, "Compressed bodies are not accepted (Content-Encoding); send the body uncompressed."))
				return
			}
		}
		body, err := readBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength)
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeError(w, r, s.log, domain.Errorf(domain.CodeFileTooLarge, "The report is larger than %d bytes.", MaxBodyBytes))
			return
		case err != nil:
			writeError(w, r, s.log, domain.Errorf(domain.CodeInvalidJSON, "The report could not be read."))
			return
		}
		switch err := ks.Verify(keyID, sig, body); {
		case errors.Is(err, secretscan.ErrUnknownKey):
			writeError(w, r, s.log, domain.Errorf(domain.CodeInvalidCredentials, "No configured secret-scanning key has the identifier in %s.", secretscan.HeaderKeyID))
			return
		case err != nil:
			writeError(w, r, s.log, domain.Errorf(domain.CodeInvalidCredentials, "The report's signature does not verify against the configured secret-scanning keys."))
			return
		}
		entries, derr := secretscan.ParseReport(body)
		if derr != nil {
			writeError(w, r, s.log, derr)
			return
		}
		answers := make([]secretscan.Answer, 0, len(entries))
		seen := make(map[string]keys.Leak, len(entries))
		for _, e := range entries {
			leak, ok := seen[e.Token]
			if !ok {
				if leak, err = svc.RevokeLeaked(r.Context(), e.Token, e.URL); err != nil {
					// What was revoked stays revoked; GitHub sends the
					// report again, and a replay revokes nothing twice.
					writeError(w, r, s.log, err)
					return
				}
				seen[e.Token] = leak
				if leak.Revoked {
					// The key's public prefix only, never the token.
					s.log.WarnContext(r.Context(), "API key revoked: reported leaked",
						"request_id", requestID(r.Context()), "key_prefix", leak.Key.Prefix, "key_id", leak.Key.ID,
						"account_id", leak.Key.AccountID)
				}
			}
			label := secretscan.FalsePositive
			if leak.Ours {
				label = secretscan.TruePositive
			}
			answers = append(answers, secretscan.Answer{TokenHash: secretscan.TokenHash(e.Token), TokenType: e.Type, Label: label})
		}
		writeJSON(w, http.StatusOK, answers)
	})
}
