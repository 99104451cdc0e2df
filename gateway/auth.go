package gateway

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/idemgate/idemgate/redact"
)

// Authorized reports whether r carries "Authorization: Bearer <token>".
// With no token configured every request is authorized: ValidateListen
// allows that only on a loopback address.
func Authorized(r *http.Request, token redact.Secret) bool {
	if token.IsZero() {
		return true
	}
	got, ok := bearer(r)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token.Reveal())) == 1
}

// Unauthorized is the reason a face gives a request Authorized refused, in
// its words: no bearer token came with it, or the one that came is not the
// token the face is configured with (tokenSetting names where that is set,
// e.g. "http_api.token or IDEMGATE_HTTP_API_TOKEN"). It never quotes what
// was sent. wwwAuth is the WWW-Authenticate value to answer with (RFC 6750:
// error="invalid_token" for a wrong token).
func Unauthorized(r *http.Request, tokenSetting string) (reason, wwwAuth string) {
	if _, ok := bearer(r); !ok {
		return "A bearer token is required: send Authorization: Bearer <token>.", `Bearer realm="idemgate"`
	}
	return "The bearer token is not accepted: send the token configured in " + tokenSetting + " as Authorization: Bearer <token>.",
		`Bearer realm="idemgate", error="invalid_token"`
}

// bearer returns the credential of an "Authorization: Bearer …" header.
func bearer(r *http.Request) (string, bool) {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	got = strings.TrimSpace(got)
	return got, got != ""
}

// ErrNoToken refuses an HTTP face on a non-loopback address without a
// bearer token: anyone who can reach it could move money.
var ErrNoToken = errors.New("a bearer token is required to serve on a non-loopback address")

// ValidateListen checks a face's listen address: it must parse, and an
// address other than loopback (127.0.0.0/8, ::1, localhost) needs a token.
func ValidateListen(addr string, token redact.Secret) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !token.IsZero() || Loopback(host) {
		return nil
	}
	return fmt.Errorf("listen address %q: %w", addr, ErrNoToken)
}

// Loopback reports whether host names only the loopback interface; ""
// (every interface) does not.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
