// Package secretscan owns what GitHub's secret-scanning partner programme
// sends us (docs/secret-scanning.md): the public keys a report is signed
// with, the check of a report's signature, the parsing of its entries, and
// the answer's shape. Which reported tokens are credentials of ours, and
// revoking them, is keys.Service's (RevokeLeaked).
package secretscan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"

	"github.com/agentapi/agentapi/internal/domain"
)

// CredentialPattern is the regular expression of our credential format, as
// registered with GitHub (docs/secret-scanning.md): the shape that
// credential.Generate makes. A match is only a candidate; the checksum and
// the stored hash decide.
const CredentialPattern = `agk_(live|test)_[0-9a-z]{12}_[0-9A-Za-z]{38}`

// The request headers GitHub signs a report with.
const (
	HeaderKeyID     = "Github-Public-Key-Identifier"
	HeaderSignature = "Github-Public-Key-Signature"
)

// MaxEntries bounds the entries of one report; GitHub sends far fewer.
const MaxEntries = 1000

// Entry is one token GitHub found.
type Entry struct {
	Token  string `json:"token"`
	Type   string `json:"type"`
	URL    string `json:"url"`
	Source string `json:"source"`
}

// Label is our verdict on a reported token.
type Label string

const (
	// TruePositive: the token is a credential of ours that exists (it is
	// revoked now, or was already).
	TruePositive Label = "true_positive"
	// FalsePositive: anything else (not ours, unknown, a bad checksum).
	FalsePositive Label = "false_positive"
)

// Answer is one entry of the response, in the order of the report.
type Answer struct {
	TokenHash string `json:"token_hash"`
	TokenType string `json:"token_type"`
	Label     Label  `json:"label"`
}

// TokenHash is the SHA-256 of token in lower-case hex: how the answer names
// a token without repeating it.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// ParseReport reads a report's body: one JSON array of entries, at most
// MaxEntries. It decodes entry by entry, so a body of a million tiny
// entries costs no more than MaxEntries of them before it is refused.
func ParseReport(body []byte) ([]Entry, *domain.Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidJSON(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, domain.Errorf(domain.CodeDatatypeMismatch, "A report is a JSON array of {token, type, url, source} objects.")
	}
	var out []Entry
	for dec.More() {
		if len(out) == MaxEntries {
			return nil, domain.Errorf(domain.CodeInvalidValue, "A report has at most %d entries; send the rest in another.", MaxEntries)
		}
		var e Entry
		if err := dec.Decode(&e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, domain.Errorf(domain.CodeDatatypeMismatch, "Entry %d of the report: token, type, url and source are strings.", len(out))
			}
			return nil, invalidJSON(err)
		}
		out = append(out, e)
	}
	if _, err := dec.Token(); err != nil { // the closing ]
		return nil, invalidJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, domain.Errorf(domain.CodeInvalidJSON, "The report has data after its array.")
	}
	return out, nil
}

func invalidJSON(err error) *domain.Error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return domain.Errorf(domain.CodeInvalidJSON, "The report is not complete JSON.")
	}
	return domain.Errorf(domain.CodeInvalidJSON, "The report is not valid JSON.")
}
