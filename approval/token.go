package approval

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// Pre-signed approval tokens: the business's own system (the page where a
// customer pressed "Pay") signs a compact JWS that approves exactly one
// request, and the command carries it (approval_token in the envelope, the
// Idempotency-Approval header of the HTTP API, the approval_token argument
// of an MCP tool). idemgate verifies it offline, with keys from its
// configuration, and the intent executes at once.
//
// Claims (all required):
//
//	iss            an issuer named in approvals.tokens.issuers
//	exp            the token's expiry; at most max_lifetime ahead
//	jti            the token's id: one intent per jti and issuer
//	operation      the operation type ("payment.charge")
//	operation_key  the intent's operation key (<env>:<operation>:<intent_id>:<key_version>)
//	fingerprint    the request's fingerprint (hex SHA-256 of its significant fields)
//
// Algorithms: EdDSA (Ed25519) and HS256 only, each issuer with its own.

// Token algorithms.
const (
	AlgEdDSA = "EdDSA"
	AlgHS256 = "HS256"
)

// MaxTokenLen bounds an approval token; a longer one is refused unread.
const MaxTokenLen = 4096

// DefaultTokenMaxLifetime is the longest a token may still be valid for
// when it arrives, unless configured otherwise.
const DefaultTokenMaxLifetime = time.Hour

// TokenIssuer is one system allowed to sign approval tokens
// (approvals.tokens.issuers). An issuer may be listed more than once, with
// another key, while its keys are rotated.
type TokenIssuer struct {
	// Name is the iss claim the issuer's tokens carry; it names the
	// decision in the trail. [a-z0-9._@:/-], 1-64 bytes.
	Name string `mapstructure:"name"`
	// Alg is EdDSA or HS256.
	Alg string `mapstructure:"alg"`
	// KeyFile holds the key: for EdDSA the issuer's Ed25519 public key
	// (PEM, "PUBLIC KEY"), for HS256 the shared secret (at least 32 bytes;
	// surrounding white space is dropped).
	KeyFile string `mapstructure:"key_file"`
	// KeyEnv names an environment variable holding the key instead.
	KeyEnv string `mapstructure:"key_env"`
}

// TokenConfig is approvals.tokens.
type TokenConfig struct {
	Issuers []TokenIssuer `mapstructure:"issuers"`
	// MaxLifetime refuses a token whose exp is further ahead than this
	// (default 1h): a token is a short-lived yes for one request.
	MaxLifetime time.Duration `mapstructure:"max_lifetime"`
	// Leeway tolerates clock skew on exp and nbf (default 0, at most 5m).
	Leeway time.Duration `mapstructure:"leeway"`
}

// Enabled reports whether any issuer is configured.
func (c TokenConfig) Enabled() bool { return len(c.Issuers) > 0 }

// TokenClaims are the claims of an approval token.
type TokenClaims struct {
	jwt.RegisteredClaims
	Operation    string `json:"operation"`
	OperationKey string `json:"operation_key"`
	Fingerprint  string `json:"fingerprint"`
}

// TokenApproval is what a verified token approves, and by whom.
type TokenApproval struct {
	// Issuer is the token's iss: who decided.
	Issuer string
	// ID is the token's jti.
	ID string
	// ExpiresAt is the token's exp.
	ExpiresAt time.Time
}

// ErrToken wraps every refused token (*TokenError).
var ErrToken = errors.New("approval token refused")

// TokenError says why a token was refused. Reason is safe to log and
// publish: it never quotes the token or its claims' values, the operation
// type and the expiry aside.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return "approval_token: " + e.Reason }

// Unwrap returns ErrToken.
func (e *TokenError) Unwrap() error { return ErrToken }

func refused(format string, a ...any) error { return &TokenError{Reason: fmt.Sprintf(format, a...)} }

type issuerKey struct {
	alg string
	key any // ed25519.PublicKey or []byte
}

// Verifier checks approval tokens offline against the configured issuers'
// keys. Build it with NewVerifier.
type Verifier struct {
	keys    map[string][]issuerKey // by issuer name
	maxLife time.Duration
	parser  *jwt.Parser
	now     func() time.Time
}

func issuerName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._@:/-", c) >= 0) {
			return false
		}
	}
	return true
}

// NewVerifier loads the issuers' keys (getenv reads KeyEnv; nil means
// os.Getenv) and checks the configuration. Every error wraps ErrConfig and
// names the key to fix, never a key's bytes.
func NewVerifier(cfg TokenConfig, getenv func(string) string) (*Verifier, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = DefaultTokenMaxLifetime
	}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...)))
	}
	if cfg.MaxLifetime < time.Second || cfg.MaxLifetime > 7*24*time.Hour {
		bad("approvals.tokens.max_lifetime %v: between 1s and 168h", cfg.MaxLifetime)
	}
	if cfg.Leeway < 0 || cfg.Leeway > 5*time.Minute {
		bad("approvals.tokens.leeway %v: between 0 and 5m", cfg.Leeway)
	}
	v := &Verifier{keys: map[string][]issuerKey{}, maxLife: cfg.MaxLifetime, now: time.Now}
	for i, is := range cfg.Issuers {
		at := fmt.Sprintf("approvals.tokens.issuers[%d]", i)
		if !issuerName(is.Name) {
			bad("%s: name %q: [a-z0-9._@:/-]{1,64}", at, is.Name)
		}
		if is.Alg != AlgEdDSA && is.Alg != AlgHS256 {
			bad("%s (%s): alg %q: EdDSA or HS256", at, is.Name, is.Alg)
			continue
		}
		if prev := v.keys[is.Name]; len(prev) > 0 && prev[0].alg != is.Alg {
			bad("%s (%s): an issuer signs with one algorithm; it is listed with %s and %s", at, is.Name, prev[0].alg, is.Alg)
		}
		raw, where, err := readKey(is, getenv)
		if err != nil {
			bad("%s (%s): %v", at, is.Name, err)
			continue
		}
		k, err := parseKey(is.Alg, raw)
		if err != nil {
			bad("%s (%s): %s: %v", at, is.Name, where, err)
			continue
		}
		v.keys[is.Name] = append(v.keys[is.Name], issuerKey{alg: is.Alg, key: k})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	v.parser = jwt.NewParser(jwt.WithValidMethods([]string{AlgEdDSA, AlgHS256}), jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway), jwt.WithTimeFunc(func() time.Time { return v.now() }), jwt.WithStrictDecoding())
	return v, nil
}

// readKey reads an issuer's key from its file or its variable (exactly
// one of them); where names it for errors.
func readKey(is TokenIssuer, getenv func(string) string) (raw []byte, where string, err error) {
	switch {
	case is.KeyFile != "" && is.KeyEnv != "":
		return nil, "", errors.New("key_file and key_env both set: one of them")
	case is.KeyFile != "":
		b, err := os.ReadFile(is.KeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("key_file: %w", err)
		}
		return b, "key_file " + is.KeyFile, nil
	case is.KeyEnv != "":
		s := getenv(is.KeyEnv)
		if s == "" {
			return nil, "", fmt.Errorf("key_env %s is unset or empty", is.KeyEnv)
		}
		return []byte(s), "key_env " + is.KeyEnv, nil
	}
	return nil, "", errors.New("no key: set key_file or key_env")
}

func parseKey(alg string, raw []byte) (any, error) {
	if alg == AlgHS256 {
		s := []byte(strings.TrimSpace(string(raw)))
		if len(s) < 32 {
			return nil, fmt.Errorf("an HS256 secret of %d bytes; at least 32", len(s))
		}
		return s, nil
	}
	b, _ := pem.Decode(raw)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM PUBLIC KEY block (an Ed25519 public key; never the private key)")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, errors.New("not a PKIX public key")
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an Ed25519 public key")
	}
	return pub, nil
}

// Issuers lists the configured issuers' names.
func (v *Verifier) Issuers() []string {
	out := make([]string, 0, len(v.keys))
	for n := range v.keys {
		out = append(out, n)
	}
	return out
}

// SetClock sets the verifier's clock (tests).
func (v *Verifier) SetClock(now func() time.Time) { v.now = now }

var errUnknownIssuer = errors.New("unknown issuer")

// Verify checks token against op: signed by a configured issuer with its
// algorithm and key, not expired, exp at most max_lifetime ahead, a jti of
// the key alphabet, and naming op's operation, key and fingerprint. Every
// refusal is a *TokenError whose reason quotes nothing of the token.
func (v *Verifier) Verify(token string, op operation.Operation) (TokenApproval, error) {
	c, err := v.Parse(token)
	if err != nil {
		return TokenApproval{}, err
	}
	switch {
	case c.Operation != op.Type:
		if operation.ValidateOperationName(c.Operation) == nil && redact.Detect(c.Operation) == redact.KindNone {
			return TokenApproval{}, refused("the token approves operation %s, not %s", c.Operation, op.Type)
		}
		return TokenApproval{}, refused("the token approves another operation than %s", op.Type)
	case c.OperationKey != op.Key.String():
		return TokenApproval{}, refused("the token approves another intent (its operation_key is not this command's)")
	case c.Fingerprint != op.Fingerprint:
		return TokenApproval{}, refused("the token approves another request: its fingerprint is not this command's " +
			"(the amount, currency, recipient or another significant field differs); a changed request needs a new token")
	}
	return TokenApproval{Issuer: c.Issuer, ID: c.ID, ExpiresAt: c.ExpiresAt.UTC()}, nil
}

// Parse verifies token's signature and time claims and returns its
// claims, each required one present; it does not compare them with a
// command (Verify does).
func (v *Verifier) Parse(token string) (TokenClaims, error) {
	var c TokenClaims
	if token == "" {
		return c, refused("empty")
	}
	if len(token) > MaxTokenLen {
		return c, refused("longer than %d bytes", MaxTokenLen)
	}
	alg := ""
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		alg = t.Method.Alg()
		ks, ok := v.keys[c.Issuer]
		if !ok {
			return nil, errUnknownIssuer
		}
		set := jwt.VerificationKeySet{}
		for _, k := range ks {
			if k.alg == alg {
				set.Keys = append(set.Keys, k.key)
			}
		}
		if len(set.Keys) == 0 {
			return nil, fmt.Errorf("issuer signs with %s", ks[0].alg)
		}
		return set, nil
	})
	switch {
	case err == nil:
	case errors.Is(err, errUnknownIssuer):
		return c, refused("its issuer (iss) is not one of approvals.tokens.issuers")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid) && alg == "",
		errors.Is(err, jwt.ErrTokenUnverifiable) && alg == "" && !errors.Is(err, jwt.ErrTokenMalformed):
		return c, refused("signed with an algorithm other than EdDSA or HS256")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return c, refused("signed with %s, not the issuer's algorithm", alg)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return c, refused("bad signature: not signed by the issuer's key")
	case errors.Is(err, jwt.ErrTokenExpired):
		return c, refused("expired at %s", c.ExpiresAt.UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return c, refused("not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return c, refused("no exp claim: a token must expire")
	default:
		return c, refused("not a signed JWT (a compact JWS: header.claims.signature, base64url)")
	}
	now := v.now()
	switch {
	case c.ExpiresAt.After(now.Add(v.maxLife)):
		return c, refused("expires more than %v from now (approvals.tokens.max_lifetime)", v.maxLife)
	case c.ID == "" || operation.ValidateID("jti", c.ID) != nil || len(c.ID) > 128:
		return c, refused("jti: required, 1-128 bytes of [A-Za-z0-9._~:-], never a secret")
	case c.Operation == "" || c.OperationKey == "" || c.Fingerprint == "":
		return c, refused("operation, operation_key and fingerprint are required claims")
	}
	return c, nil
}

// LooksLikeToken reports whether s has the form of a compact JWS
// ("eyJ…" header, three base64url parts): how the HTTP API tells an
// approval token from an approval_id in Idempotency-Approval (an
// approval_id can never hold a JWT: the key rules refuse one).
func LooksLikeToken(s string) bool {
	if !strings.HasPrefix(s, "eyJ") || strings.Count(s, ".") != 2 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
