package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/gateway/openapi"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/redact"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json")

const (
	agentToken    = "agent-token-for-the-openapi-test"
	approverToken = "approver-token-alice-0000000001"
)

// TestDocumentIsValidOpenAPI: the document for the built-in types loads and
// validates as OpenAPI 3.1, and equals docs/openapi.json (go test
// ./gateway/openapi -update rewrites it).
func TestDocumentIsValidOpenAPI(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Document(openapi.Spec{Env: "prod", Version: "(devel)", Types: builtins(), Approvals: true})
	require.NoError(t, err)
	loaded := load(t, doc)
	require.True(t, loaded.IsOpenAPI31OrLater())
	for _, typ := range builtins() {
		require.NotNil(t, loaded.Paths.Find("/v1/operations/"+typ.Name), typ.Name)
	}
	const golden = "../../docs/openapi.json"
	if *update {
		require.NoError(t, os.WriteFile(golden, append(doc, '\n'), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), string(doc)+"\n", "docs/openapi.json is stale: go test ./gateway/openapi -update")
}

func load(t *testing.T, doc []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	loaded, err := loader.LoadFromData(doc)
	require.NoError(t, err)
	require.NoError(t, loaded.Validate(context.Background()))
	return loaded
}

// exchange is one request and its response, as a client saw them.
type exchange struct {
	req  *http.Request
	body []byte
	code int
	hdr  http.Header
	resp []byte
}

// recorder keeps every exchange through the HTTP API.
type recorder struct {
	mu   sync.Mutex
	all  []exchange
	base string
}

func (r *recorder) do(t *testing.T, method, path, body string, headers ...string) exchange {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	e := exchange{req: req, body: []byte(body), code: resp.StatusCode, hdr: resp.Header, resp: out}
	r.mu.Lock()
	r.all = append(r.all, e)
	r.mu.Unlock()
	return e
}

// validate checks e's response (and, when wantValidRequest, its request)
// against the document.
func validate(router routers.Router, e exchange, wantValidRequest bool) error {
	req := e.req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(e.body))
	route, params, err := router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: no route: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}}
	if wantValidRequest {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("%s %s: request: %w", req.Method, req.URL.Path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: e.code, Header: e.hdr,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(e.resp)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s → %d %s: response: %w", req.Method, req.URL.Path, e.code, e.resp, err)
	}
	return nil
}

// TestRealExchangesMatchTheDocument drives the HTTP API of a running
// daemon (real NATS, the journal, the emulators; approvals on, a declared
// process) through every kind of answer, and validates each request and
// response against the document the daemon serves. A response changed to
// break the contract fails the validation: the check bites.
func TestRealExchangesMatchTheDocument(t *testing.T) {
	t.Parallel()
	d := daemontest.StartWith(t, "sqlite", daemontest.Options{Approvals: true,
		Processes: map[string]process.Decl{"order.checkout": daemontest.Checkout()}})
	d.StartCoordinator(t, "coord-openapi", nil)
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 20 * time.Second, PollAfter: 100 * time.Millisecond},
		gateway.Deps{NC: d.NC, Journal: d.Journal, Processes: d.Processes})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	svc := &approval.Service{Store: d.Journal, Policy: d.Approvals.Policy,
		Approvers: []approval.Approver{{Name: "alice", Token: approverToken}}}
	doc, err := openapi.Document(openapi.Spec{Env: daemontest.Env, Version: "test", Types: g.Types(), Processes: g.Processes(), Approvals: true})
	require.NoError(t, err)
	srv := httptest.NewServer(httpapi.Handler(g, httpapi.Config{Token: redact.Secret(agentToken), MaxBody: 4096, Approvals: svc, OpenAPI: doc}))
	t.Cleanup(srv.Close)
	r := &recorder{base: srv.URL}
	auth := []string{"Authorization", "Bearer " + agentToken}
	with := func(h ...string) []string { return append(append([]string(nil), auth...), h...) }

	// The served document is the one built.
	served := r.do(t, http.MethodGet, openapi.Path, "", auth...)
	require.Equal(t, http.StatusOK, served.code)
	require.JSONEq(t, string(doc), string(served.resp))
	require.Equal(t, http.StatusUnauthorized, r.do(t, http.MethodGet, openapi.Path, "").code, "behind the token like the rest")
	r.all = nil
	loaded := load(t, doc)
	router, err := legacy.NewRouter(loaded)
	require.NoError(t, err)

	invoice := `{"order_id":"o-1","customer_id":"cust-17","amount_minor":125000,"currency":"RUB"}`
	charge := `{"account_id":"merchant-account-17","order_id":"o-2","amount_minor":125000,"currency":"RUB"}`
	valid := []exchange{
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", invoice, with("Idempotency-Key", `"inv-1"`)...),
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", invoice, with("Idempotency-Key", `"inv-1"`)...),
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", strings.Replace(invoice, "125000", "99", 1), with("Idempotency-Key", `"inv-1"`)...),
		r.do(t, http.MethodGet, "/v1/operations/"+daemontest.Env+":invoice.create:inv-1:v1", "", auth...),
		r.do(t, http.MethodGet, "/v1/operations/"+daemontest.Env+":invoice.create:nothing:v1", "", auth...),
		r.do(t, http.MethodPost, "/v1/operations/payment.charge", charge, with("Idempotency-Key", `"chg-1"`, "Prefer", "wait=1")...),
		r.do(t, http.MethodPost, "/v1/processes/order.checkout",
			`{"order_id":"p-1","customer_id":"cust-17","account_id":"merchant-account-17","amount_minor":125000,"currency":"RUB","responsible_id":"12"}`,
			with("Idempotency-Key", `"proc-1"`, "Prefer", "wait=0")...),
	}
	require.Equal(t, []int{200, 200, 409, 200, 404, 202, 202}, codes(valid))
	require.Equal(t, "true", valid[1].hdr.Get("Idempotent-Replayed"))
	var waiting gateway.Answer
	require.NoError(t, json.Unmarshal(valid[5].resp, &waiting))
	require.Equal(t, "await_approval", string(waiting.NextAction))
	key := daemontest.Env + ":payment.charge:chg-1:v1"
	decisions := []exchange{
		r.do(t, http.MethodPost, "/v1/operations/"+key+"/approval", `{"decision":"approve","reason":"confirmed"}`, auth...),
		r.do(t, http.MethodPost, "/v1/operations/"+key+"/approval", `{"decision":"approve","reason":"confirmed"}`, "Authorization", "Bearer "+approverToken),
		r.do(t, http.MethodPost, "/v1/operations/"+key+"/approval", `{"decision":"deny","reason":"changed my mind"}`, "Authorization", "Bearer "+approverToken),
	}
	require.Equal(t, []int{403, 200, 409}, codes(decisions))
	valid = append(valid, decisions...)
	// Requests the document says are wrong, answered as it says.
	invalid := []exchange{
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", invoice, auth...),
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", invoice, "Idempotency-Key", `"inv-2"`),
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", `{"order_id":"o-3"}`, with("Idempotency-Key", `"inv-3"`)...),
		r.do(t, http.MethodPost, "/v1/operations/invoice.create", strings.Repeat(" ", 5000)+invoice, with("Idempotency-Key", `"inv-4"`)...),
		r.do(t, http.MethodGet, "/v1/operations/not-a-key", "", auth...),
	}
	require.Equal(t, []int{400, 401, 422, 413, 400}, codes(invalid))

	for _, e := range valid {
		require.NoError(t, validate(router, e, true))
	}
	for _, e := range invalid {
		require.NoError(t, validate(router, e, false))
	}

	// The validator bites: an answer without next_action, a pending answer
	// without Retry-After, an unknown status code.
	broken := valid[0]
	var m map[string]any
	require.NoError(t, json.Unmarshal(broken.resp, &m))
	delete(m, "next_action")
	broken.resp, _ = json.Marshal(m)
	require.Error(t, validate(router, broken, true), "an answer without next_action")
	pending := valid[5]
	pending.hdr = pending.hdr.Clone()
	pending.hdr.Del("Retry-After")
	pending.resp = bytes.Replace(pending.resp, []byte(`"await_approval"`), []byte(`"wait_for_it"`), 1)
	require.Error(t, validate(router, pending, true), "an unknown next action")
	teapot := valid[0]
	teapot.code = http.StatusTeapot
	require.Error(t, validate(router, teapot, true), "a status the document does not list")
}

func codes(es []exchange) []int {
	out := make([]int, len(es))
	for i, e := range es {
		out[i] = e.code
	}
	return out
}

// TestEveryTypeHasItsBody: each operation type's request body lists the
// type's fields, and nothing an HTTP request carries in headers.
func TestEveryTypeHasItsBody(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Document(openapi.Spec{Env: "prod", Types: builtins()})
	require.NoError(t, err)
	var parsed struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(doc, &parsed))
	for _, typ := range builtins() {
		body, ok := parsed.Components.Schemas["Body."+typ.Name]
		require.True(t, ok, typ.Name)
		var want, have []string
		for _, f := range typ.Fields {
			want = append(want, f.Name)
		}
		for p := range body.Properties {
			if p != "approval_id" {
				have = append(have, p)
			}
		}
		sort.Strings(want)
		sort.Strings(have)
		require.Equal(t, want, have, typ.Name)
		require.NotContains(t, body.Properties, "intent_id")
		require.NotContains(t, body.Properties, "approval_token")
	}
}

// builtins are the built-in operation types.
func builtins() []operation.Type {
	reg := operation.DefaultRegistry()
	var out []operation.Type
	for _, n := range reg.Names() {
		t, _ := reg.Lookup(n)
		out = append(out, t)
	}
	return out
}
