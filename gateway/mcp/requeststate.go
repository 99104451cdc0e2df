package mcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The requestState of an input_required answer (the approval elicitation)
// is opaque to the client and comes back with its response. Ours is signed
// (HMAC-SHA256 under a key of this server's), bound to the caller (a digest
// of its bearer credentials), to the operation key and to an expiry, and
// used once: a response replayed, or carried to another intent or by
// another caller, is not trusted — the call then answers as if no response
// had come (await_approval, the link), it never waits on it.

// requestState is what the state carries.
type requestState struct {
	Key       string `json:"k"`
	Principal string `json:"p"`
	Expires   int64  `json:"e"`
	Nonce     string `json:"n"`
}

// errBadState is every refusal of a requestState.
var errBadState = errors.New("requestState refused")

// stateSigner signs and checks request states and remembers the used ones
// until they expire.
type stateSigner struct {
	key  []byte
	now  func() time.Time
	mu   sync.Mutex
	used map[string]time.Time // nonce → expiry
}

func newStateSigner(key []byte) *stateSigner {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return &stateSigner{key: key, now: time.Now, used: map[string]time.Time{}}
}

// principal names the caller of req: a digest of the bearer credentials it
// sent (none: "anonymous").
func principal(req *sdk.CallToolRequest) string {
	if req.Extra != nil {
		if a := req.Extra.Header.Get("Authorization"); a != "" {
			sum := sha256.Sum256([]byte(a))
			return hex.EncodeToString(sum[:12])
		}
	}
	return "anonymous"
}

func (s *stateSigner) sign(key, who string, ttl time.Duration) string {
	n := make([]byte, 12)
	_, _ = rand.Read(n)
	body, _ := json.Marshal(requestState{Key: key, Principal: who, Expires: s.now().Add(ttl).Unix(), Nonce: hex.EncodeToString(n)})
	b := base64.RawURLEncoding.EncodeToString(body)
	return b + "." + s.mac(b)
}

func (s *stateSigner) mac(b string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(b))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// use checks state for key and who and spends it.
func (s *stateSigner) use(state, key, who string) error {
	b, sig, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.mac(b))) {
		return errBadState
	}
	raw, err := base64.RawURLEncoding.DecodeString(b)
	if err != nil {
		return errBadState
	}
	var st requestState
	if json.Unmarshal(raw, &st) != nil {
		return errBadState
	}
	now := s.now()
	switch {
	case st.Key != key, st.Principal != who, now.Unix() > st.Expires:
		return errBadState
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, exp := range s.used {
		if now.Unix() > exp.Unix() {
			delete(s.used, n)
		}
	}
	if _, spent := s.used[st.Nonce]; spent {
		return errBadState
	}
	s.used[st.Nonce] = time.Unix(st.Expires, 0)
	return nil
}
