package sandbox

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// What emulators share in serving their contracts: bodies in and out, the
// credential checks, and paging. Each target's own shapes (error bodies,
// field names, which paging it uses) stay in its package.

// WriteJSON writes v as JSON with the given status and content type
// ("application/json" when empty).
func WriteJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "sandbox: encode response", http.StatusInternalServerError)
		return
	}
	WriteBody(w, status, contentType, b)
}

// WriteBody writes an encoded body (a stored answer replayed under its
// idempotency key) with the given status and content type
// ("application/json" when empty).
func WriteBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	if contentType == "" {
		contentType = "application/json"
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Stored is an answer an emulator keeps under an idempotency key to replay
// it: the hash of the request that made it (another request under the key
// is refused), the answer's status and body, and when it was stored.
type Stored struct {
	Hash   string
	Status int
	Body   []byte
	At     time.Time
}

// Fresh reports whether st is still kept at now, under keys kept for ttl.
func (st Stored) Fresh(now time.Time, ttl time.Duration) bool {
	return now.Sub(st.At) < ttl
}

// Replay writes the stored answer.
func (st Stored) Replay(w http.ResponseWriter) {
	WriteBody(w, st.Status, "", st.Body)
}

// ReadBody reads at most limit bytes of the request body; a larger body is
// an error.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("request body over %d bytes", limit)
	}
	return b, nil
}

// SameSecret compares a presented credential with the accepted one in
// constant time.
func SameSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// BasicAuthorized reports whether r carries HTTP Basic credentials equal to
// user and password.
func BasicAuthorized(r *http.Request, user, password string) bool {
	u, p, ok := r.BasicAuth()
	return ok && SameSecret(u, user) && SameSecret(p, password)
}

// BearerToken returns the token of an "Authorization: Bearer" header, or "".
func BearerToken(r *http.Request) string {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return tok
	}
	return ""
}

// QueryLimit reads the page size parameter name of q: def when absent or
// empty, ok false unless an integer in 1..maxLimit.
func QueryLimit(q url.Values, name string, def, maxLimit int) (limit int, ok bool) {
	v := q.Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, false
	}
	return n, true
}

// Cursor is the opaque page token of a position in a list (an offset or a
// sequence number, as the emulator pages).
func Cursor(pos int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(pos)))
}

// CursorPos reads a token made by Cursor; ok is false for any other.
func CursorPos(token string) (pos int, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil && n >= 0
}

// Page returns the items from offset, at most limit of them, and the offset
// of the next page, or -1 when this page is the last.
func Page[T any](items []T, offset, limit int) ([]T, int) {
	offset = min(max(offset, 0), len(items))
	end := min(offset+limit, len(items))
	page := append([]T{}, items[offset:end]...)
	if end < len(items) {
		return page, end
	}
	return page, -1
}
