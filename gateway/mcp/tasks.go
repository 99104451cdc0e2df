// The Tasks extension (io.modelcontextprotocol/tasks) on the SDK's
// extension points: a receiving middleware turns a tools/call whose
// operation is not final into a task for a client that declared the
// extension, and tasks/get, tasks/update and tasks/cancel are custom
// methods. The SDK (v1.8.0) carries no type of this extension: the
// results below are the extension's wire shapes, built here.

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/gateway"
)

// ExtensionTasks is the Tasks extension's identifier.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// Methods of the Tasks extension.
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
)

// MetaKeyCancel is the _meta key of a tasks/cancel acknowledgement that
// says what the cancel did: {"cancelled", "effect_possible", "reason"}.
const MetaKeyCancel = "io.idemgate/cancel"

// pollTask is how a task's message says to poll.
const pollTask = "read this task again with tasks/get"

// DefaultTaskWait is Options.TaskWait's default.
const DefaultTaskWait = 2 * time.Second

// declaresTasks reports whether a request's client declared the Tasks
// extension: in the request's own capabilities (_meta, the current
// revision) or in its session's (initialize, the earlier ones).
func declaresTasks(meta map[string]any, ss *sdk.ServerSession) bool {
	if caps, ok := meta[sdk.MetaKeyClientCapabilities].(map[string]any); ok {
		if ext, ok := caps["extensions"].(map[string]any); ok {
			if _, ok := ext[ExtensionTasks]; ok {
				return true
			}
		}
	}
	if ss == nil {
		return false
	}
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		_, ok := ip.Capabilities.Extensions[ExtensionTasks]
		return ok
	}
	return false
}

// taskCall is a tools/call that may become a task: the middleware puts it
// in the handler's context, the handler fills in the request it made.
type taskCall struct {
	wait time.Duration
	req  *gateway.Request
}

type taskCallKey struct{}

// asTask gives an operation tool's handler the task call of its context:
// the wait to use, and where to leave the request. Nil when the client
// did not declare the extension.
func asTask(ctx context.Context) *taskCall {
	tc, _ := ctx.Value(taskCallKey{}).(*taskCall)
	return tc
}

// taskMiddleware answers, for a client that declared the Tasks extension,
// a tools/call whose operation is still pending with a task (the
// operation key as its id) once the task is recorded; any other answer,
// and every answer to a client without the extension, goes out as the
// tool gave it.
func taskMiddleware(g *gateway.Gateway, opts Options) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			ss, _ := req.GetSession().(*sdk.ServerSession)
			if !declaresTasks(req.GetParams().GetMeta(), ss) {
				return next(ctx, method, req)
			}
			tc := &taskCall{wait: opts.TaskWait}
			res, err := next(context.WithValue(ctx, taskCallKey{}, tc), method, req)
			if err != nil || tc.req == nil {
				return res, err
			}
			ctr, ok := res.(*sdk.CallToolResult)
			if !ok {
				return res, nil
			}
			var a gateway.Answer
			if raw, ok := ctr.StructuredContent.(json.RawMessage); !ok || json.Unmarshal(raw, &a) != nil || a.Status != gateway.StatusPending {
				return res, nil
			}
			t, err := g.StartTask(ctx, *tc.req)
			if err != nil {
				// The answer as it is (pending, poll with get_operation)
				// is still true.
				opts.Log.Warn("mcp: task not recorded; answering pending", "operation_key", a.OperationKey, "error", err.Error())
				return res, nil
			}
			var caps *sdk.ClientCapabilities
			if ctr, ok := req.(*sdk.CallToolRequest); ok {
				caps = ctr.ClientCapabilities()
			}
			tr, err := taskResultOf(t, "task", taskInput(t, caps, opts))
			if err != nil {
				return nil, err
			}
			tr.Result = nil // a CreateTaskResult carries the task alone
			return tr, nil
		}
	}
}

// taskResult is the extension's Task on the wire: a CreateTaskResult
// (resultType "task") or a tasks/get result (resultType "complete", with
// the call's result once completed).
type taskResult struct {
	sdk.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          int64               `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	Result         *sdk.CallToolResult `json:"result,omitempty"`
	// InputRequests are the outstanding requests of an input_required
	// task, keyed by a name that stands for one request over its life.
	InputRequests sdk.InputRequestMap `json:"inputRequests,omitempty"`
}

// taskInputRequired is the extension's status of a task waiting for the
// client's input.
const taskInputRequired = "input_required"

// taskInput is what a working task asks the client: the approval page,
// as a URL-mode elicitation, while the operation waits for a person's
// approval — when the deployment asks approvals through MCP
// (Options.ElicitApprovals), there is a page to give, the client declared
// URL-mode elicitation, and the client has not answered that request
// already (tasks/update). Nil: nothing to ask.
func taskInput(t gateway.Task, caps *sdk.ClientCapabilities, opts Options) sdk.InputRequestMap {
	if !approvalOutstanding(t, opts) || caps == nil || caps.Elicitation == nil || caps.Elicitation.URL == nil {
		return nil
	}
	return sdk.InputRequestMap{approvalInput: approvalElicitation(t.ID, t.Approval.URL, t.ID)}
}

// approvalOutstanding reports whether the task's approval request is
// outstanding: the operation waits for a person, the deployment asks
// approvals through MCP, there is a page to give, and no client has
// answered the request yet. Who is asked is taskInput's to decide.
func approvalOutstanding(t gateway.Task, opts Options) bool {
	return t.Status == gateway.TaskWorking && opts.ElicitApprovals && t.Approval != nil && t.Approval.URL != "" &&
		!slices.Contains(t.Answered, approvalInput)
}

// approvalElicitation asks the user to open an operation's approval page:
// the page, not the elicitation, decides (the person must be an approver,
// and not the one who submitted the call).
func approvalElicitation(key, url, operation string) *sdk.ElicitParams {
	return &sdk.ElicitParams{Mode: "url", URL: url, ElicitationID: key,
		Message: fmt.Sprintf("%s waits for a person's approval. Open the page to see exactly what is approved; an approver decides there.", operation)}
}

// taskResultOf is t on the wire; a completed task carries the tool's own
// result for its answer, exactly as the tool returns it; a working one
// with something to ask is input_required, with the requests.
func taskResultOf(t gateway.Task, resultType string, asks sdk.InputRequestMap) (*taskResult, error) {
	msg := gateway.Answer{Reason: t.Message}.PollBy(pollTask).Reason
	tr := &taskResult{ResultType: resultType, TaskID: t.ID, Status: t.Status, StatusMessage: msg,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: t.UpdatedAt.UTC().Format(time.RFC3339Nano),
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollAfter.Milliseconds()}
	if len(asks) > 0 {
		// The reason stays the answer's; only how to go on is the task's.
		tr.Status, tr.InputRequests = taskInputRequired, asks
		tr.StatusMessage = gateway.Answer{Reason: t.Message}.PollBy("ask the user to open the approval page in inputRequests " +
			"(an approver decides there), answer it with tasks/update, then " + pollTask).Reason
	}
	if t.Status == gateway.TaskCompleted {
		res, err := toolResult(t.Answer)
		if err != nil {
			return nil, err
		}
		tr.Result = res
	}
	return tr, nil
}

// taskParams are the parameters of tasks/get, tasks/update and
// tasks/cancel.
type taskParams struct {
	sdk.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses sdk.InputResponseMap `json:"inputResponses,omitempty"`
}

// clientCaps are the capabilities of a tasks/* request's client: the
// request's own (the current revision) or its session's.
func clientCaps(ss *sdk.ServerSession, p *taskParams) *sdk.ClientCapabilities {
	return (&sdk.ServerRequest[*taskParams]{Session: ss, Params: p}).ClientCapabilities()
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel.
type ackResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// addTaskMethods serves tasks/get, tasks/update and tasks/cancel.
func addTaskMethods(srv *sdk.Server, g *gateway.Gateway, opts Options) error {
	read := func(ctx context.Context, ss *sdk.ServerSession, p *taskParams) (gateway.Task, error) {
		if !declaresTasks(p.Meta, ss) {
			return gateway.Task{}, missingTasksCapability()
		}
		t, err := g.Task(ctx, p.TaskID)
		switch {
		case errors.Is(err, gateway.ErrTaskNotFound):
			return t, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: task not found"}
		case err != nil:
			return t, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to retrieve task: the journal could not be read"}
		}
		return t, nil
	}
	if err := sdk.AddReceivingCustomMethod(srv, methodTasksGet, func(ctx context.Context, ss *sdk.ServerSession, p *taskParams) (*taskResult, error) {
		t, err := read(ctx, ss, p)
		if err != nil {
			return nil, err
		}
		return taskResultOf(t, "complete", taskInput(t, clientCaps(ss, p), opts))
	}); err != nil {
		return err
	}
	// tasks/update: the answer to the approval request, while it is
	// outstanding, is recorded so that the request is never asked again
	// (the task goes back to working: the approver decides on the page,
	// whatever the user answered). Responses to requests not outstanding
	// are ignored, as the extension says.
	if err := sdk.AddReceivingCustomMethod(srv, methodTasksUpdate, func(ctx context.Context, ss *sdk.ServerSession, p *taskParams) (*ackResult, error) {
		t, err := read(ctx, ss, p)
		if err != nil {
			return nil, err
		}
		if _, answered := p.InputResponses[approvalInput]; answered && approvalOutstanding(t, opts) {
			if err := g.AnswerTaskInput(ctx, t.ID, approvalInput); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to update task: the answer could not be recorded"}
			}
		}
		return &ackResult{ResultType: "complete"}, nil
	}); err != nil {
		return err
	}
	return sdk.AddReceivingCustomMethod(srv, methodTasksCancel, func(ctx context.Context, ss *sdk.ServerSession, p *taskParams) (*ackResult, error) {
		if _, err := read(ctx, ss, p); err != nil {
			return nil, err
		}
		c, err := g.CancelTask(ctx, p.TaskID)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Failed to cancel task: " + err.Error()}
		}
		ack := &ackResult{ResultType: "complete"}
		ack.SetMeta(map[string]any{MetaKeyCancel: map[string]any{"cancelled": c.Cancelled, "effect_possible": c.EffectPossible, "reason": c.Reason}})
		return ack, nil
	})
}

// missingTasksCapability is the error of a tasks/* request from a client
// that did not declare the extension.
func missingTasksCapability() error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}})
	return &jsonrpc.Error{Code: sdk.CodeMissingRequiredClientCapabilities,
		Message: fmt.Sprintf("Missing required client capability: the %s extension", ExtensionTasks), Data: data}
}
