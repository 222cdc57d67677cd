package api

import (
	"context"
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
func (s *Server) handleSecretScanning(ks *secretscan.Keys, svc *keys.Service) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.limitAnonymous(w, r, true) {
			return nil
		}
		body, err := readSignedReport(w, r, ks)
		if err != nil {
			return err
		}
		entries, derr := secretscan.ParseReport(body)
		if derr != nil {
			return derr
		}
		answers, err := s.revokeReported(r.Context(), svc, entries)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, answers)
		return nil
	}
}

// readSignedReport returns the body of a report whose signature headers
// are present and verify against ks, or the error to answer: headers are
// checked first, then the encoding, the size, and last the signature.
func readSignedReport(w http.ResponseWriter, r *http.Request, ks *secretscan.Keys) ([]byte, error) {
	keyID, sig := r.Header.Get(secretscan.HeaderKeyID), r.Header.Get(secretscan.HeaderSignature)
	if keyID == "" || sig == "" {
		return nil, domain.Errorf(domain.CodeInvalidCredentials,
			"A report must be signed: send the %s and %s headers.", secretscan.HeaderKeyID, secretscan.HeaderSignature)
	}
	if compressed(r.Header) {
		return nil, domain.Errorf(domain.CodeUnsupportedType, "Compressed bodies are not accepted (Content-Encoding); send the body uncompressed.")
	}
	body, err := bodyOf(r)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, domain.Errorf(domain.CodeFileTooLarge, "The report is larger than %d bytes.", MaxBodyBytes)
	case err != nil:
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The report could not be read.")
	}
	switch err := ks.Verify(keyID, sig, body); {
	case errors.Is(err, secretscan.ErrUnknownKey):
		return nil, domain.Errorf(domain.CodeInvalidCredentials, "No configured secret-scanning key has the identifier in %s.", secretscan.HeaderKeyID)
	case err != nil:
		return nil, domain.Errorf(domain.CodeInvalidCredentials, "The report's signature does not verify against the configured secret-scanning keys.")
	}
	return body, nil
}

// compressed reports whether h names a Content-Encoding other than identity.
func compressed(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// revokeReported revokes every reported credential of ours that is active
// and labels each entry, in the report's order. A token reported twice is
// looked up once. On an error, what was revoked stays revoked; GitHub
// sends the report again, and a replay revokes nothing twice.
func (s *Server) revokeReported(ctx context.Context, svc *keys.Service, entries []secretscan.Entry) ([]secretscan.Answer, error) {
	answers := make([]secretscan.Answer, 0, len(entries))
	seen := make(map[string]keys.Leak, len(entries))
	for _, e := range entries {
		leak, ok := seen[e.Token]
		if !ok {
			var err error
			if leak, err = svc.RevokeLeaked(ctx, e.Token, e.URL); err != nil {
				return nil, err
			}
			seen[e.Token] = leak
			if leak.Revoked { // logged with the key's public prefix only, never the token
				s.log.WarnContext(ctx, "API key revoked: reported leaked",
					"request_id", requestID(ctx), "key_prefix", leak.Key.Prefix, "key_id", leak.Key.ID,
					"account_id", leak.Key.AccountID)
			}
		}
		label := secretscan.FalsePositive
		if leak.Ours {
			label = secretscan.TruePositive
		}
		answers = append(answers, secretscan.Answer{TokenHash: secretscan.TokenHash(e.Token), TokenType: e.Type, Label: label})
	}
	return answers, nil
}
