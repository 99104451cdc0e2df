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
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token.Reveal())) == 1
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
