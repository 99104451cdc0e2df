// Streamable HTTP: one endpoint serving both eras of the protocol, chosen
// per request as the 2026-07-28 revision says a dual-era server does.

package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/redact"
)

// Revisions of MCP.
const (
	// RevisionCurrent is the stateless revision: no initialize, no
	// sessions, the version and the client's capabilities in every
	// request's _meta.
	RevisionCurrent = "2026-07-28"
	// RevisionLegacy is the newest revision with an initialize handshake
	// and sessions.
	RevisionLegacy = "2025-11-25"
)

// Revisions are the protocol revisions served, newest first: the current
// one statelessly, the earlier ones with initialize and sessions.
func Revisions() []string { return sdk.SupportedProtocolVersions() }

// HTTPOptions tune Handler.
type HTTPOptions struct {
	// Token, when set, must come with every request as "Authorization:
	// Bearer <token>" (401 otherwise).
	Token redact.Secret
	// MaxBody bounds a request body in bytes (413 beyond it). Default 1 MiB.
	MaxBody int64
	// Log receives the transport's logs.
	Log *slog.Logger
	// AllowedOrigins are the browser origins allowed to call (see
	// ValidateOrigins): a request whose Origin header is present and not
	// on the list is refused with 403, one without the header passes. Nil:
	// DefaultAllowedOrigins; empty: no browser origin at all.
	AllowedOrigins []string
}

// protocolVersionHeader carries a request's revision over HTTP (2025-06-18
// and later).
const protocolVersionHeader = "MCP-Protocol-Version"

// Handler serves srv over Streamable HTTP, both eras on one endpoint:
//
//   - a request of the current revision (its MCP-Protocol-Version header,
//     or the protocol version in its _meta, is 2026-07-28 or later) is
//     served statelessly: no session is made or read, GET and DELETE have
//     no meaning for it;
//   - anything else — initialize, a request with Mcp-Session-Id, the
//     session's GET stream and DELETE — is served by the earlier
//     revisions' rules, with sessions (idle ones close after 30 minutes).
//
// A request naming a revision that is not served is answered 400 with the
// JSON-RPC UnsupportedProtocolVersion error listing the ones that are.
func Handler(srv *sdk.Server, opts HTTPOptions) http.Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.AllowedOrigins == nil {
		opts.AllowedOrigins = DefaultAllowedOrigins
	}
	get := func(*http.Request) *sdk.Server { return srv }
	current := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, Logger: opts.Log,
		MaxRequestBodyBytes: opts.MaxBody, PropagateRequestCancellation: true})
	legacy := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Logger: opts.Log, SessionTimeout: 30 * time.Minute,
		MaxRequestBodyBytes: opts.MaxBody})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !checkOrigin(w, r, opts.AllowedOrigins) {
			return
		}
		if !gateway.Authorized(r, opts.Token) {
			reason, challenge := gateway.Unauthorized(r, "mcp.token (IDEMGATE_MCP_TOKEN)")
			w.Header().Set("WWW-Authenticate", challenge)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			b, _ := json.Marshal(map[string]string{"error": reason})
			_, _ = w.Write(append(b, '\n'))
			return
		}
		switch era(w, r, opts.MaxBody) {
		case eraCurrent:
			current.ServeHTTP(w, r)
		case eraLegacy:
			legacy.ServeHTTP(w, r)
		}
	})
}

type eraOf int

const (
	eraAnswered eraOf = iota // refused here already
	eraCurrent
	eraLegacy
)

// era says which revision's rules serve r. It reads a POST's body (and
// puts it back) for the protocol version in its _meta; a body over
// maxBody is left to the SDK, which refuses it with 413.
func era(w http.ResponseWriter, r *http.Request, maxBody int64) eraOf {
	header := r.Header.Get(protocolVersionHeader)
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return eraLegacy
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	_ = r.Body.Close()
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return eraAnswered
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg) // a body that is not one request is the SDK's to refuse
	metaVersion, hasMeta := msg.Params.Meta[sdk.MetaKeyProtocolVersion].(string)
	if hasMeta && header != "" && header != metaVersion {
		writeError(w, msg.ID, sdk.CodeHeaderMismatch, "header mismatch: "+protocolVersionHeader+" "+header+
			" does not match the protocol version in _meta, "+metaVersion, nil)
		return eraAnswered
	}
	for _, v := range []string{header, metaVersion} {
		if v != "" && !slices.Contains(Revisions(), v) {
			data, _ := json.Marshal(sdk.UnsupportedProtocolVersionData{Supported: Revisions(), Requested: v})
			writeError(w, msg.ID, sdk.CodeUnsupportedProtocolVersion, "unsupported protocol version "+v, data)
			return eraAnswered
		}
	}
	if header >= RevisionCurrent || hasMeta {
		return eraCurrent
	}
	return eraLegacy
}

// writeError answers 400 with a JSON-RPC error, as the current revision
// does for a request it refuses before reading it as a call.
func writeError(w http.ResponseWriter, id json.RawMessage, code int64, message string, data json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e := map[string]any{"code": code, "message": message}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(append(b, '\n'))
}
