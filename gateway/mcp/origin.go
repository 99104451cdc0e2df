package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// DefaultAllowedOrigins are the browser origins Handler accepts when
// HTTPOptions.AllowedOrigins is nil: pages served from this machine's
// loopback names, on any port. A DNS-rebinding page keeps its own origin
// (the attacker's name), so it is refused.
var DefaultAllowedOrigins = []string{"http://localhost", "http://127.0.0.1", "http://[::1]"}

// ValidateOrigins checks an allow-list: each entry is "*" (any origin) or
// an origin, scheme://host[:port] with nothing after it; an entry without
// a port allows that scheme and host on any port.
func ValidateOrigins(list []string) error {
	var errs []error
	for _, o := range list {
		if o == "*" {
			continue
		}
		if _, _, _, err := parseOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", o, err))
		}
	}
	return errors.Join(errs...)
}

// parseOrigin splits an origin into its scheme, host and port (""
// without one), lower-cased.
func parseOrigin(o string) (scheme, host, port string, err error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", "", "", errors.New("not an origin (scheme://host[:port])")
	}
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", "", "", errors.New("not an origin (scheme://host[:port], nothing after it)")
	}
	return strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port(), nil
}

// originAllowed reports whether a request's Origin header value is on the
// allow-list.
func originAllowed(origin string, allowed []string) bool {
	scheme, host, port, err := parseOrigin(origin)
	if err != nil {
		return false
	}
	for _, a := range allowed {
		if a == "*" {
			return true
		}
		as, ah, ap, err := parseOrigin(a)
		if err == nil && as == scheme && ah == host && (ap == "" || ap == port) {
			return true
		}
	}
	return false
}

// checkOrigin refuses, with 403, a request whose Origin header is present
// and not allowed (the MCP transport's guard against DNS rebinding); a
// request without one (a client that is not a browser) passes.
func checkOrigin(w http.ResponseWriter, r *http.Request, allowed []string) bool {
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) == 1 && originAllowed(values[0], allowed) {
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write([]byte(`{"error":"this Origin is not allowed to reach the MCP endpoint (mcp.allowed_origins)"}` + "\n"))
	return false
}
