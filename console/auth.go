package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Roles. An operator may do what a viewer may, and resolve. An approver
// may do what a viewer may, and approve or deny intents that wait for a
// person's approval; an operator may be an approver too (User.Approver), a
// viewer never.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleApprover = "approver"
)

// User is an operator who logs in with a token. The configuration keeps
// the token's SHA-256 only (`printf %s TOKEN | sha256sum`), never the token.
type User struct {
	Name        string `mapstructure:"name"`
	Role        string `mapstructure:"role"`
	TokenSHA256 string `mapstructure:"token_sha256"`
	// Approver lets an operator approve too (role approver implies it; a
	// viewer cannot be one).
	Approver bool `mapstructure:"approver"`
}

// approves reports whether the user may decide approvals.
func (u User) approves() bool {
	return u.Role == RoleApprover || (u.Role == RoleOperator && u.Approver)
}

// Config is the console's configuration (console: in idemgate's).
type Config struct {
	// Enabled serves the console under /ui/ on the admin listener.
	Enabled bool `mapstructure:"enabled"`
	// Users log in with their token.
	Users []User `mapstructure:"users"`
	// ProxyHeader, when set, names the header in which a reverse proxy in
	// front of the admin listener passes the authenticated user's name:
	// a request carrying it needs no login. Set it only when every request
	// reaches the listener through that proxy.
	ProxyHeader string `mapstructure:"proxy_header"`
	// ProxyOperators are the proxy's users given the operator role; the
	// others are viewers.
	ProxyOperators []string `mapstructure:"proxy_operators"`
	// SessionKeyFile holds the key that signs session cookies (at least 32
	// bytes). Empty: a random key per start, so restarting ends sessions.
	SessionKeyFile string `mapstructure:"session_key_file"`
	// SessionTTL is how long a login lasts. Default 8h.
	SessionTTL time.Duration `mapstructure:"session_ttl"`
	// PageSize is the rows of one search page. Default 50.
	PageSize int `mapstructure:"page_size"`
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.SessionTTL == 0 {
		c.SessionTTL = 8 * time.Hour
	}
	if c.PageSize == 0 {
		c.PageSize = 50
	}
	return c
}

// Validate checks the configuration (when enabled).
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if len(c.Users) == 0 && c.ProxyHeader == "" {
		errs = append(errs, errors.New("console: enabled with no users and no proxy_header: nobody could log in"))
	}
	seen := map[string]bool{}
	for i, u := range c.Users {
		switch {
		case u.Name == "":
			errs = append(errs, fmt.Errorf("console.users[%d]: empty name", i))
		case seen[u.Name]:
			errs = append(errs, fmt.Errorf("console.users[%d]: %s named twice", i, u.Name))
		}
		seen[u.Name] = true
		if u.Role != RoleViewer && u.Role != RoleOperator && u.Role != RoleApprover {
			errs = append(errs, fmt.Errorf("console.users[%d] %s: role %q: viewer, operator or approver", i, u.Name, u.Role))
		}
		if u.Role == RoleViewer && u.Approver {
			errs = append(errs, fmt.Errorf("console.users[%d] %s: a viewer is never an approver (role approver, or an operator with approver: true)", i, u.Name))
		}
		if b, err := hex.DecodeString(u.TokenSHA256); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("console.users[%d] %s: token_sha256 must be 64 hex digits (printf %%s TOKEN | sha256sum)", i, u.Name))
		}
	}
	if c.SessionTTL < time.Minute {
		errs = append(errs, fmt.Errorf("console.session_ttl %v: at least 1m", c.SessionTTL))
	}
	if c.PageSize < 1 || c.PageSize > 500 {
		errs = append(errs, fmt.Errorf("console.page_size %d: 1..500", c.PageSize))
	}
	return errors.Join(errs...)
}

// HashToken is the token_sha256 of a token.
func HashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// session is who is logged in, carried in a signed cookie.
type session struct {
	Name string `json:"n"`
	Role string `json:"r"`
	// Exp is the end of the session (Unix seconds).
	Exp int64 `json:"e"`
	// ID is random per login: the CSRF token is derived from it.
	ID string `json:"i"`
	// Approver: the user may decide approvals (User.approves).
	Approver bool `json:"a,omitempty"`
	// Proxy: authenticated by the reverse proxy's header, no cookie.
	Proxy bool `json:"-"`
}

const (
	sessionCookie = "idemgate_console"
	loginCookie   = "idemgate_console_login"
	csrfField     = "csrf"
)

// signer signs sessions and derives CSRF tokens with one key.
type signer struct{ key []byte }

func newKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s signer) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

func (s signer) encode(se session) string {
	body, _ := json.Marshal(se)
	p := base64.RawURLEncoding.EncodeToString(body)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.mac("session", p))
}

func (s signer) decode(v string, now time.Time) (session, bool) {
	p, sig, ok := strings.Cut(v, ".")
	if !ok {
		return session{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac("session", p)) {
		return session{}, false
	}
	body, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return session{}, false
	}
	var se session
	if json.Unmarshal(body, &se) != nil || se.Name == "" || now.Unix() >= se.Exp {
		return session{}, false
	}
	return se, true
}

// csrf is the CSRF token of a session: every form carries it, every POST
// is refused without it.
func (s signer) csrf(se session) string {
	id := se.ID
	if se.Proxy {
		id = "proxy:" + se.Name
	}
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", id))
}

func (s signer) csrfOK(se session, r *http.Request) bool {
	got := r.PostFormValue(csrfField)
	return got != "" && hmac.Equal([]byte(got), []byte(s.csrf(se)))
}

// lookupToken finds the user whose token this is, comparing hashes in
// constant time over every user.
func lookupToken(users []User, token string) (User, bool) {
	h := HashToken(token)
	var found User
	ok := false
	for _, u := range users {
		if subtle.ConstantTimeCompare([]byte(strings.ToLower(u.TokenSHA256)), []byte(h)) == 1 {
			found, ok = u, true
		}
	}
	return found, ok && token != ""
}
