// Package httpapi is the gateway's HTTP face, after the IETF
// Idempotency-Key header draft (draft-ietf-httpapi-idempotency-key-header):
//
//	POST /v1/operations/{operation}   Idempotency-Key: <intent_id>, JSON payload
//	GET  /v1/operations/{key}
//	POST /v1/processes/{name}         a declared process, as an operation (process.go)
//	GET  /v1/processes/{key}
//
// The Idempotency-Key is the intent id (a structured-field string, quoted,
// or a bare token); Idempotency-Approval carries a pre-signed approval
// token (a compact JWS) or an approval_id, which may come in the body too; Prefer: wait=N bounds the wait. A final
// outcome is 200 with gateway.Answer as the body (the same document MCP
// returns as structured content), pending is 202 with Location and
// Retry-After, a key reused with another payload is 409, a rejected command
// 422, a missing key 400; a replay carries Idempotent-Replayed: true.
// Errors are RFC 9457 problem+json, with the Answer in an "answer" member
// where there is one. Bearer token auth as for MCP; bodies are limited.
//
// An incoming W3C traceparent/tracestate is continued: the command's publish
// span is the agent's span's child.
//
// Imports: gateway, operation, redact and internal/telemetry; never worker,
// consumer, adapters or cmd.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// Headers.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderApproval carries a pre-signed approval token (a compact JWS,
	// approval.LooksLikeToken) or, for anything else, approval_id.
	HeaderApproval = "Idempotency-Approval"
	// HeaderReplayed is "true" on an answer that already existed.
	HeaderReplayed = "Idempotent-Replayed"
)

// Config tunes the handler.
type Config struct {
	// Token, when set, must come with every request as "Authorization:
	// Bearer <token>" (401 otherwise).
	Token redact.Secret
	// MaxBody bounds a request body in bytes (413 beyond it). Default 64 KiB.
	MaxBody int64
	// Approvals, when set, serves POST /v1/operations/{key}/approval to
	// approvers' tokens (approval.Approver.Token) only: an agent's token
	// (Token) is refused 403, separation of duties.
	Approvals *approval.Service
	// OpenAPI is the API's OpenAPI document (package gateway/openapi),
	// served at GET /v1/openapi.json behind the same token as the rest: it
	// lists a deployment's operation types and processes. Nil: not served.
	OpenAPI []byte
}

// OpenAPIPath is where the OpenAPI document is served.
const OpenAPIPath = "/v1/openapi.json"

// Prefix is where operations are served.
const Prefix = "/v1/operations/"

// Handler serves the HTTP API on g.
func Handler(g *gateway.Gateway, cfg Config) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 10
	}
	s := &server{g: g, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Prefix+"{operation}", s.submit)
	mux.HandleFunc("GET "+Prefix+"{key}", s.get)
	s.processRoutes(mux)
	if cfg.OpenAPI != nil {
		mux.HandleFunc("GET "+OpenAPIPath, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(cfg.OpenAPI)
		})
	}
	mux.HandleFunc(Prefix+"{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		writeProblem(w, r, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
			"POST /v1/operations/{operation} submits, GET /v1/operations/{key} reads.", nil)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "not-found", "Not found",
			"The API serves POST /v1/operations/{operation} and GET /v1/operations/{key}.", nil)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, approvalSuffix) && strings.HasPrefix(r.URL.Path, Prefix) {
			s.approval(w, r)
			return
		}
		if !gateway.Authorized(r, cfg.Token) {
			reason, challenge := gateway.Unauthorized(r, "http_api.token (IDEMGATE_HTTP_API_TOKEN)")
			w.Header().Set("WWW-Authenticate", challenge)
			writeProblem(w, r, http.StatusUnauthorized, "unauthorized", "Unauthorized", reason, nil)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type server struct {
	g   *gateway.Gateway
	cfg Config
}

// submit is POST /v1/operations/{operation}.
func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	s.submitAs(w, r, r.PathValue("operation"))
}

// submitAs submits the request as a call of opType (an operation type, or
// a process's "process.<name>").
func (s *server) submitAs(w http.ResponseWriter, r *http.Request, opType string) {
	if !s.g.Known(opType) {
		a := answer.Rejected("", "", string(operation.CodeUnknownOperation), "no such operation type; known types: "+strings.Join(s.names(), ", "))
		writeProblem(w, r, http.StatusNotFound, "unknown-operation", "Unknown operation", a.Reason, &a)
		return
	}
	intent, bad := intentHeader(r.Header)
	if bad != nil {
		a := answer.Rejected("", opType, bad.code, bad.what+"; send the intent id in one Idempotency-Key header: "+
			"one per business intent, reused unchanged on every retry")
		writeProblem(w, r, http.StatusBadRequest, bad.kind, bad.title, a.Reason, &a)
		return
	}
	approvals := r.Header.Values(HeaderApproval)
	if len(approvals) > 1 {
		a := rejected(opType, string(operation.CodeInvalidField), fmt.Sprintf("the request carries %d Idempotency-Approval headers; send one", len(approvals)))
		writeProblem(w, r, http.StatusBadRequest, "idempotency-approval-repeated", "One Idempotency-Approval header", a.Reason, &a)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			a := rejected(opType, string(operation.CodeNotJSON), "the body must be application/json")
			writeProblem(w, r, http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", a.Reason, &a)
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			a := rejected(opType, string(operation.CodeTooLarge), fmt.Sprintf("the body is larger than %d bytes", s.cfg.MaxBody))
			writeProblem(w, r, http.StatusRequestEntityTooLarge, "too-large", "Payload too large", a.Reason, &a)
			return
		}
		writeProblem(w, r, http.StatusBadRequest, "bad-body", "Unreadable body", "The request body could not be read.", nil)
		return
	}
	header, token := r.Header.Get(HeaderApproval), ""
	if approval.LooksLikeToken(header) {
		header, token = "", header
	}
	payload, approvalID, badApproval := splitApproval(body, header)
	if badApproval != "" {
		a := rejected(opType, string(operation.CodeInvalidField), badApproval)
		writeProblem(w, r, http.StatusUnprocessableEntity, "rejected", "Rejected", a.Reason, &a)
		return
	}
	wait, asked := preferWait(r.Header.Values("Prefer"))
	if asked {
		wait = min(wait, s.g.Config().MaxWait)
		if wait == 0 {
			wait = time.Millisecond // "do not wait": answer now, pending unless already settled
		}
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait.Seconds())))
	}
	// An agent's traceparent is continued: the command's publish is its child.
	ctx := telemetry.ExtractHTTP(r.Context(), r.Header)
	a := s.g.Submit(ctx, gateway.Request{Operation: opType, IntentID: intent, ApprovalID: approvalID, ApprovalToken: token, Payload: payload, Wait: wait})
	if a.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	s.answer(w, r, a)
}

// answer writes an answer with the status code of its outcome.
func (s *server) answer(w http.ResponseWriter, r *http.Request, a gateway.Answer) {
	switch a.Status {
	case gateway.StatusSucceeded, gateway.StatusFailedFinal:
		writeJSON(w, http.StatusOK, "application/json", a)
	case gateway.StatusPending:
		loc := Prefix + a.OperationKey
		if p, ok := processLocation(a); ok {
			loc = p
		}
		w.Header().Set("Location", loc)
		w.Header().Set("Retry-After", retryAfter(a.RetryAfterMS))
		status := http.StatusAccepted
		if r.Method == http.MethodGet {
			status = http.StatusOK
		}
		writeJSON(w, status, "application/json", a)
	case gateway.StatusConflict:
		writeProblem(w, r, http.StatusConflict, "conflict", "Idempotency-Key reused with another payload", a.Reason, &a)
	case gateway.StatusRejected:
		if a.ErrorCode == gateway.CodeNotRouted {
			writeProblem(w, r, http.StatusNotFound, "not-routed", "No adapter serves this operation here", a.Reason, &a)
			return
		}
		writeProblem(w, r, http.StatusUnprocessableEntity, "rejected", "Rejected", a.Reason, &a)
	case gateway.StatusNotFound:
		writeProblem(w, r, http.StatusNotFound, "not-found", "No such operation", a.Reason, &a)
	default: // unavailable
		w.Header().Set("Retry-After", retryAfter(a.RetryAfterMS))
		writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "Unavailable", a.Reason, &a)
	}
}

// get is GET /v1/operations/{key}.
func (s *server) get(w http.ResponseWriter, r *http.Request) {
	a := s.g.Lookup(r.Context(), r.PathValue("key"), true)
	if a.Status == gateway.StatusRejected {
		writeProblem(w, r, http.StatusBadRequest, "bad-key", "Malformed operation key", a.Reason, &a)
		return
	}
	s.answer(w, r, a)
}

func (s *server) names() []string {
	var out []string
	for _, t := range s.g.Types() {
		out = append(out, t.Name)
	}
	return out
}

func rejected(opType, code, what string) gateway.Answer {
	return answer.Rejected("", opType, code, what)
}

// headerError is why the Idempotency-Key header cannot be used: a problem
// kind and title, the answer's error code, and what is wrong, in words that
// never quote the value.
type headerError struct{ kind, title, code, what string }

// intentHeader reads the intent id from the request's Idempotency-Key
// header: exactly one, well formed, and not looking like a card number or a
// secret (the key's own screening says the same of a well-formed one).
func intentHeader(h http.Header) (string, *headerError) {
	values := h.Values(HeaderIdempotencyKey)
	switch {
	case len(values) == 0 || len(values) == 1 && strings.TrimSpace(values[0]) == "":
		return "", &headerError{"idempotency-key-missing", "Idempotency-Key required", string(operation.CodeMissingField),
			"the Idempotency-Key header is missing"}
	case len(values) > 1:
		return "", &headerError{"idempotency-key-repeated", "One Idempotency-Key header", string(operation.CodeInvalidField),
			fmt.Sprintf("the request carries %d Idempotency-Key headers, and which one names the intent cannot be guessed", len(values))}
	}
	intent, ok := idempotencyKey(values[0])
	if k := redact.Detect(values[0]); k != redact.KindNone {
		return "", &headerError{"idempotency-key-secret", "Idempotency-Key refused", string(operation.CodeBadKey),
			"the Idempotency-Key header holds what looks like a " + k.String() + "; an intent id must never carry a card number or a secret"}
	}
	if !ok {
		return "", &headerError{"idempotency-key-malformed", "Malformed Idempotency-Key", string(operation.CodeInvalidField),
			`the Idempotency-Key header is malformed: it must be a quoted structured-field string ("order-48291") or a bare token without spaces, quotes, commas or semicolons`}
	}
	return intent, nil
}

// idempotencyKey reads the header: a structured-field string ("…", with
// \" and \\ escapes) as the draft specifies, or a bare token.
func idempotencyKey(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", false
	}
	if v[0] != '"' {
		return v, !strings.ContainsAny(v, "\" ,;")
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
				return "", false
			}
			i++
			b.WriteByte(v[i])
		case '"':
			return b.String(), i == len(v)-1 && b.Len() > 0
		default:
			if c < 0x20 || c > 0x7e {
				return "", false
			}
			b.WriteByte(c)
		}
	}
	return "", false
}

// splitApproval takes approval_id out of the body when it is there; the
// header and the member must agree when both are given.
func splitApproval(body []byte, header string) (payload json.RawMessage, approval, bad string) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"approval_id"`)) {
		return body, header, ""
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(trimmed, &members) != nil {
		return body, header, "" // the decoder names what is wrong
	}
	raw, ok := members["approval_id"]
	if !ok {
		return body, header, ""
	}
	var inBody string
	if json.Unmarshal(raw, &inBody) != nil {
		return nil, "", "approval_id must be a string"
	}
	if header != "" && inBody != "" && header != inBody {
		return nil, "", "approval_id in the body differs from the Idempotency-Approval header"
	}
	delete(members, "approval_id")
	payload, err := json.Marshal(members)
	if err != nil {
		return nil, "", "the body must be a JSON object"
	}
	if header == "" {
		header = inBody
	}
	return payload, header, ""
}

// preferWait reads "Prefer: wait=N" (RFC 7240, seconds).
func preferWait(values []string) (time.Duration, bool) {
	for _, v := range values {
		for _, pref := range strings.Split(v, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n < 0 {
				continue
			}
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// retryAfter is Retry-After in whole seconds, at least 1.
func retryAfter(ms int64) string {
	return strconv.FormatInt(max((ms+999)/1000, 1), 10)
}

// problem is an RFC 9457 problem document; Answer is the gateway's answer
// where there is one.
type problem struct {
	Type     string          `json:"type"`
	Title    string          `json:"title"`
	Status   int             `json:"status"`
	Detail   string          `json:"detail,omitempty"`
	Instance string          `json:"instance,omitempty"`
	Answer   *gateway.Answer `json:"answer,omitempty"`
}

// ProblemType is the type URI of a problem kind.
func ProblemType(kind string) string { return "urn:idemgate:problem:" + kind }

// writeProblem writes a problem document. Its instance is the request path
// masked as free text is (a card number or a key in the path is not sent
// back), and left out of a 401: an unauthenticated caller gets nothing of
// its request back.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, kind, title, detail string, a *gateway.Answer) {
	instance := ""
	if status != http.StatusUnauthorized {
		instance = operation.MaskText(r.URL.Path)
	}
	writeJSON(w, status, "application/problem+json", problem{Type: ProblemType(kind), Title: title, Status: status,
		Detail: detail, Instance: instance, Answer: a})
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"type":"about:blank","title":"Internal error","status":500}`)
		contentType = "application/problem+json"
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
