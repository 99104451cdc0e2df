package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/operation"
)

// Options tune the MCP server.
type Options struct {
	// Version is reported to clients as the server's version. Default "dev".
	Version string
	// Log receives the SDK's and the server's own logs; never payloads.
	Log *slog.Logger
	// TaskWait bounds how long a call from a client that declared the Tasks
	// extension waits for the outcome before it is answered with a task.
	// Default DefaultTaskWait (2s).
	TaskWait time.Duration
	// ElicitApprovals: when a call's intent waits for a person's approval
	// and the client supports URL-mode elicitation, ask the user through
	// MCP to open the approval page (where an approver decides), for up to
	// ElicitWait, then answer with the intent's state then. Off by default:
	// the pending answer carries the link either way.
	ElicitApprovals bool
	// ElicitWait bounds the elicitation and the wait for the decision that
	// follows it. Default 2 minutes.
	ElicitWait time.Duration
	// StateKey signs the requestState of the elicitation (requeststate.go);
	// nil: a random key of this server's (a response coming back to another
	// replica is then not trusted, and the call answers await_approval).
	StateKey []byte
	states   *stateSigner
}

// Path is where the Streamable HTTP endpoint is served.
const Path = "/mcp"

// instructions is what a client tells its model about the server as a whole.
const instructions = "idemgate executes business operations (1C invoices, CRM tasks and deals, payments) at most once per intent. " +
	"Every operation tool takes an intent_id: make one per business intent and reuse it on every retry; never make a new one because a call failed or timed out. " +
	"Read next_action in every answer. " + nextActionHelp

// NewServer returns an MCP server with one tool per operation type the
// gateway knows (named by ToolName, input schema from the registry), plus
// get_operation and list_unresolved. Serve it with StdioTransport, Handler
// (Streamable HTTP) or in-memory transports.
func NewServer(g *gateway.Gateway, opts Options) (*sdk.Server, error) {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.TaskWait <= 0 {
		opts.TaskWait = DefaultTaskWait
	}
	if opts.ElicitWait <= 0 {
		opts.ElicitWait = 2 * time.Minute
	}
	opts.states = newStateSigner(opts.StateKey)
	// Prompts and resources: none, but their list methods answer (empty),
	// so the capabilities say they are served. Logging stays declared, as
	// the SDK declares it by default, for the earlier revisions'
	// logging/setLevel: 2026-07-28 deprecates it, not those.
	caps := &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{},
		Prompts: &sdk.PromptCapabilities{}, Resources: &sdk.ResourceCapabilities{}}
	//lint:ignore SA1019 served for the revisions before 2026-07-28, which do not deprecate it
	caps.Logging = &sdk.LoggingCapabilities{}
	caps.AddExtension(ExtensionTasks, map[string]any{})
	srv := sdk.NewServer(&sdk.Implementation{Name: "idemgate", Title: "idemgate: one intent, one effect", Version: opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: opts.Log, Capabilities: caps})
	srv.AddReceivingMiddleware(taskMiddleware(g, opts))
	if err := addTaskMethods(srv, g, opts); err != nil {
		return nil, err
	}
	out := AnswerSchema()
	for _, t := range g.Types() {
		in, err := InputSchema(g.Env(), t)
		if err != nil {
			return nil, err
		}
		moneyMoves := movesMoney(t)
		tool := &sdk.Tool{
			Name: ToolName(t.Name), Title: title(t), Description: description(t),
			InputSchema: in, OutputSchema: out,
			Annotations: &sdk.ToolAnnotations{
				Title: title(t), IdempotentHint: true, DestructiveHint: ptr(moneyMoves), OpenWorldHint: ptr(true),
			},
		}
		srv.AddTool(tool, operationHandler(g, t, opts))
	}
	if err := addProcessTools(srv, g, out, opts); err != nil {
		return nil, err
	}
	addGetOperation(srv, g, out)
	addListUnresolved(srv, g, out)
	return srv, nil
}

func title(t operation.Type) string {
	if s, ok := summaries[t.Name]; ok {
		// "Create an invoice in 1C (invoice.create)." → the words before the parenthesis.
		for i := range s {
			if s[i] == '(' {
				return s[:i-1]
			}
		}
	}
	return t.Name
}

// operationHandler calls the gateway for one operation type. It reads the
// arguments itself rather than through the SDK's schema validation, so that
// bad input is answered like every other outcome: status rejected,
// next_action fix_input, the field named in the daemon's own words.
func operationHandler(g *gateway.Gateway, t operation.Type, opts Options) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		r, bad := request(t.Name, req.Params.Arguments)
		if bad != "" {
			return toolResult(answer.Rejected("", t.Name, string(operation.CodeInvalidField), bad))
		}
		if tc := asTask(ctx); tc != nil {
			r.Wait = tc.wait
			tc.req = &r
		}
		a := g.Submit(traced(ctx, req), r)
		if asTask(ctx) == nil && opts.ElicitApprovals {
			if res, asked := askApprover(ctx, g, req, r, a, opts); asked {
				return res, nil
			}
		}
		return toolResult(a)
	}
}

// approvalInput names the approval elicitation among a call's input
// requests.
const approvalInput = "approval"

// askApprover, for an answer that waits for a person's approval, asks the
// user through URL-mode elicitation to open the approval page, where an
// approver decides (opts.ElicitApprovals, a client that declared
// elicitation.url, a link to give). It is the multi round-trip request of
// MCP: the call first answers input_required with the elicitation (the SDK
// sends it as a server request to clients of the revisions before
// 2026-07-28); the client calls again with the user's response, and the
// handler, having submitted the same request again (a copy: nothing more
// happens), waits for the decision to be carried out, up to
// opts.ElicitWait, and answers with the intent's state. Declined or
// cancelled, the answer is the waiting one, link included. The page, not
// the elicitation, decides: the person must be an approver, and not the
// one who submitted the call. asked false: the answer goes out as it is.
func askApprover(ctx context.Context, g *gateway.Gateway, req *sdk.CallToolRequest, r gateway.Request, a gateway.Answer, opts Options) (*sdk.CallToolResult, bool) {
	if a.NextAction != answer.AwaitApproval || a.Approval == nil || a.Approval.URL == "" {
		return nil, false
	}
	if resp, ok := req.Params.InputResponses[approvalInput]; ok {
		er, _ := resp.(*sdk.ElicitResult)
		if er == nil || er.Action != "accept" {
			return nil, false
		}
		if err := opts.states.use(req.Params.RequestState, a.OperationKey, principal(req)); err != nil {
			opts.Log.Warn("approval elicitation response not trusted: answered without waiting", "operation_key", a.OperationKey, "error", err.Error())
			return nil, false
		}
		res, err := toolResult(awaitDecision(ctx, g, req, r, a, opts.ElicitWait))
		return res, err == nil
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || caps.Elicitation.URL == nil {
		return nil, false
	}
	return &sdk.CallToolResult{RequestState: opts.states.sign(a.OperationKey, principal(req), opts.ElicitWait+time.Minute),
		InputRequests: sdk.InputRequestMap{approvalInput: approvalElicitation(a.OperationKey, a.Approval.URL, fmt.Sprintf("%s (%s)", a.Operation, a.OperationKey))}}, true
}

// awaitDecision follows an intent that waits for a person until the
// decision is carried out or wait passes; a, the waiting answer, when it
// does not come.
func awaitDecision(ctx context.Context, g *gateway.Gateway, req *sdk.CallToolRequest, r gateway.Request, a gateway.Answer, wait time.Duration) gateway.Answer {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		now := g.Lookup(wctx, a.OperationKey, false)
		switch {
		case now.NextAction == answer.Poll:
			// Approved and executing: the same request again (one intent,
			// one effect) waits for its outcome as the call did.
			return g.Submit(traced(ctx, req), r)
		case now.NextAction != answer.AwaitApproval && now.Status != answer.StatusUnavailable && now.Status != answer.StatusNotFound:
			return now
		}
		select {
		case <-wctx.Done():
			return a
		case <-tick.C:
		}
	}
}

// traced returns ctx continuing the agent's trace, so the command it
// submits joins it: W3C trace context in the call's _meta (traceparent,
// tracestate: MCP's convention, on any transport), else in the headers of
// the HTTP request that carried the call.
func traced(ctx context.Context, req *sdk.CallToolRequest) context.Context {
	h := http.Header{}
	if req.Params != nil {
		for _, k := range []string{"traceparent", "tracestate"} {
			if v, ok := req.Params.Meta[k].(string); ok && v != "" {
				h.Set(k, v)
			}
		}
	}
	if h.Get("traceparent") == "" && req.Extra != nil {
		h = req.Extra.Header
	}
	return telemetry.ExtractHTTP(ctx, h)
}

// request splits a tool call's arguments into the intent, the approval
// and the payload; bad says what is wrong with them.
func request(opType string, raw json.RawMessage) (r gateway.Request, bad string) {
	r.Operation = opType
	args := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return r, "arguments must be a JSON object"
		}
	}
	str := func(name string) (string, bool) {
		v, ok := args[name]
		delete(args, name)
		if !ok || string(v) == "null" {
			return "", true
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	var ok bool
	if r.IntentID, ok = str(argIntentID); !ok {
		return r, "intent_id: must be a string"
	}
	if r.ApprovalID, ok = str(argApprovalID); !ok {
		return r, "approval_id: must be a string"
	}
	if r.ApprovalToken, ok = str(argApprovalToken); !ok {
		return r, "approval_token: must be a string"
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return r, "arguments must be a JSON object"
	}
	r.Payload = payload
	return r, ""
}

// toolResult is an answer as MCP returns it: structured content, the same
// JSON as text, and isError for rejected, conflict and failed_final.
func toolResult(a gateway.Answer) (*sdk.CallToolResult, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode answer: %w", err)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
		IsError:           a.IsError(),
	}, nil
}
