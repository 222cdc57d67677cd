package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// keyObject is the contract's API key object, as GET /me describes it.
type keyObject = wire.Me

func (s *Server) handleMe() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.noQuery(w, r) {
			return
		}
		a := authFrom(r.Context())
		buf := getAppendBuf()
		defer putAppendBuf(buf)
		// The stored last_used_at lags by up to a second (write-behind);
		// this request is the latest use, so it is what /me shows.
		*buf = appendMeBody(*buf, &a.key, a.now)
		writeJSONBytes(w, http.StatusOK, *buf)
	})
}

// appendMeBody appends GET /me's body, {"data": keyObject} and a newline,
// for k used last at lastUsed, without building the keyObject: its two
// timestamps are written straight into dst (appendTime) rather than
// formatted into strings first. BenchmarkMeBody measures it against
// encoding/json; me_body_test.go holds the two equal.
func appendMeBody(dst []byte, k *domain.APIKey, lastUsed time.Time) []byte {
	dst = append(dst, `{"data":{"id":`...)
	dst = appendString(dst, k.ID)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, k.Name)
	dst = append(dst, `,"description":`...)
	dst = appendString(dst, k.Description)
	dst = append(dst, `,"prefix":`...)
	dst = appendString(dst, k.Prefix)
	dst = append(dst, `,"scopes":`...)
	if k.Scopes == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, sc := range k.Scopes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, string(sc))
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"rate_limit_per_minute":`...)
	dst = strconv.AppendInt(dst, int64(k.RateLimitPerMinute), 10)
	dst = append(dst, `,"last_used_at":`...)
	dst = appendTime(dst, lastUsed)
	dst = append(dst, `,"expires_at":`...)
	if k.ExpiresAt == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendTime(dst, *k.ExpiresAt)
	}
	dst = append(dst, `,"allowed_ips":`...)
	if len(k.AllowedIPs) == 0 {
		// AllowList.Strings of an empty list is [] (never null).
		dst = append(dst, "[]"...)
	} else {
		dst = appendStrings(dst, k.AllowedIPs.Strings())
	}
	return append(dst, "}}\n"...)
}
