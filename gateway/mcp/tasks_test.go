package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	gwmcp "github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/wire"
)

// wireTask is a task as the Tasks extension puts it on the wire.
type wireTask struct {
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage"`
	CreatedAt      time.Time           `json:"createdAt"`
	LastUpdatedAt  time.Time           `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	Result         *sdk.CallToolResult `json:"result"`
}

// callAsTaskClient calls a tool as a client of the current revision that
// declared the Tasks extension (tasks false: one that did not).
func callAsTaskClient(t *testing.T, url, tool string, args map[string]any, tasks bool) rpcResponse {
	t.Helper()
	res := post(t, url, gwmcp.RevisionCurrent, "tools/call", tool, map[string]any{"name": tool, "arguments": args, "_meta": meta(gwmcp.RevisionCurrent, tasks)})
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	require.Nil(t, res.err, "%s", res.body)
	return res
}

func taskMethod(t *testing.T, url, method, id string, tasks bool) rpcResponse {
	t.Helper()
	return post(t, url, gwmcp.RevisionCurrent, method, id, map[string]any{"taskId": id, "_meta": meta(gwmcp.RevisionCurrent, tasks)})
}

func getTask(t *testing.T, url, id string) wireTask {
	t.Helper()
	res := taskMethod(t, url, "tasks/get", id, true)
	require.Nil(t, res.err, "%s", res.body)
	var wt wireTask
	require.NoError(t, json.Unmarshal(res.result, &wt), "%s", res.result)
	require.Equal(t, "complete", wt.ResultType, "tasks/get answers resultType complete")
	require.Equal(t, id, wt.TaskID)
	return wt
}

// followTask reads a task as the extension says, every pollIntervalMs,
// until it is final (or a minute has passed).
func followTask(t *testing.T, url, id string) wireTask {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		wt := getTask(t, url, id)
		if wt.Status != gateway.TaskWorking || time.Now().After(deadline) {
			return wt
		}
		time.Sleep(time.Duration(wt.PollIntervalMs) * time.Millisecond) // the poll interval the task asks for
	}
}

// resultAnswer is a completed task's result read as the tool's answer,
// checked as every tool result is (text = structured content, isError).
func resultAnswer(t *testing.T, wt wireTask) gateway.Answer {
	t.Helper()
	require.NotNil(t, wt.Result, "a completed task carries the call's result")
	return answerOf(t, wt.Result)
}

func createdTask(t *testing.T, res rpcResponse) wireTask {
	t.Helper()
	var wt wireTask
	require.NoError(t, json.Unmarshal(res.result, &wt), "%s", res.result)
	require.Equal(t, "task", wt.ResultType, "%s", res.result)
	require.Nil(t, wt.Result, "a CreateTaskResult carries the task alone")
	require.NotNil(t, wt.TTLMs)
	require.Positive(t, *wt.TTLMs)
	require.False(t, wt.LastUpdatedAt.Before(wt.CreatedAt))
	return wt
}

// TestTaskFollowsALostAnswerToDone: YooKassa loses the answer of a
// charge. A client that declared the Tasks extension gets a task whose id
// is the operation key; tasks/get says working until the lookup finds the
// payment, then completed with the call's own answer (succeeded, done,
// not replayed: this call made it). A client without the extension gets
// pending + poll as before, and tasks/* refuse it.
func TestTaskFollowsALostAnswerToDone(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			d := daemontest.Start(t, engine)
			s := serve(t, d, gateway.Config{PollAfter: 200 * time.Millisecond, Wait: 300 * time.Millisecond}, gwmcp.Options{TaskWait: 300 * time.Millisecond})
			require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))

			task := createdTask(t, callAsTaskClient(t, s.url, "payment_charge", chargeArgs("task-lost", "order-tl", 99000), true))
			require.Equal(t, "test:payment.charge:task-lost:v1", task.TaskID, "the task id is the operation key")
			require.Equal(t, gateway.TaskWorking, task.Status)
			require.Contains(t, task.StatusMessage, "tasks/get")
			require.Equal(t, int64(200), task.PollIntervalMs)

			done := followTask(t, s.url, task.TaskID)
			require.Equal(t, gateway.TaskCompleted, done.Status, "%+v", done)
			a := resultAnswer(t, done)
			require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v", a)
			require.Equal(t, gateway.Done, a.NextAction)
			require.False(t, a.Replayed, "the task's call made the payment")
			require.Equal(t, task.TaskID, a.OperationKey)
			require.Equal(t, a.Reason, done.StatusMessage)

			// The tool, called again, tells the same story (replayed).
			again := call(t, connect(t, s.url), "payment_charge", chargeArgs("task-lost", "order-tl", 99000))
			require.True(t, again.Replayed)
			require.Equal(t, a.TargetObjectID, again.TargetObjectID)
			require.Equal(t, a.Result, again.Result)
			require.Equal(t, 1, d.YooKassa.TotalEffects())

			// Without the extension: pending and poll, never a task.
			require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))
			plain := callAsTaskClient(t, s.url, "payment_charge", chargeArgs("plain-lost", "order-pl", 5000), false)
			var ctr sdk.CallToolResult
			require.NoError(t, json.Unmarshal(plain.result, &ctr))
			pending := answerOf(t, &ctr)
			require.Equal(t, gateway.StatusPending, pending.Status)
			require.Equal(t, gateway.Poll, pending.NextAction)
			require.NotContains(t, string(plain.result), `"taskId"`)
			refused := taskMethod(t, s.url, "tasks/get", pending.OperationKey, false)
			require.Equal(t, http.StatusBadRequest, refused.status)
			require.Equal(t, int64(sdk.CodeMissingRequiredClientCapabilities), refused.err.Code, "%s", refused.body)

			unknown := taskMethod(t, s.url, "tasks/get", "test:payment.charge:never-called:v1", true)
			require.Equal(t, int64(-32602), unknown.err.Code, "%s", unknown.body)
		})
	}
}

func connect(t *testing.T, url string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// cancelAck reads what tasks/cancel's acknowledgement says it did.
func cancelAck(t *testing.T, res rpcResponse) (cancelled, effectPossible bool, reason string) {
	t.Helper()
	require.Nil(t, res.err, "%s", res.body)
	var ack struct {
		ResultType string                     `json:"resultType"`
		Meta       map[string]json.RawMessage `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(res.result, &ack))
	require.Equal(t, "complete", ack.ResultType)
	var c struct {
		Cancelled      bool   `json:"cancelled"`
		EffectPossible bool   `json:"effect_possible"`
		Reason         string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal(ack.Meta[gwmcp.MetaKeyCancel], &c), "%s", res.result)
	return c.Cancelled, c.EffectPossible, c.Reason
}

// TestCancelledTaskNeverExecutes: a charge's command waits in the stream,
// no worker has claimed it; tasks/cancel cancels it. When the daemon then
// takes the command, it replays the cancellation: no payment, ever, in
// the YooKassa ledger. The tool answers the intent cancelled, a new intent
// required.
func TestCancelledTaskNeverExecutes(t *testing.T) {
	for _, engine := range daemontest.Engines {
		t.Run(engine, func(t *testing.T) {
			d := daemontest.Prepare(t, engine)
			s := serve(t, d, gateway.Config{PollAfter: 200 * time.Millisecond}, gwmcp.Options{TaskWait: 200 * time.Millisecond})

			task := createdTask(t, callAsTaskClient(t, s.url, "payment_charge", chargeArgs("cancel-me", "order-c", 125000), true))
			require.Equal(t, gateway.TaskWorking, task.Status)
			require.Contains(t, task.StatusMessage, "queued")
			require.Equal(t, gateway.TaskWorking, getTask(t, s.url, task.TaskID).Status, "readable before any worker claimed it")

			cancelled, _, reason := cancelAck(t, taskMethod(t, s.url, "tasks/cancel", task.TaskID, true))
			require.True(t, cancelled, reason)
			got := getTask(t, s.url, task.TaskID)
			require.Equal(t, gateway.TaskCancelled, got.Status)
			require.Nil(t, got.Result)
			again, _, _ := cancelAck(t, taskMethod(t, s.url, "tasks/cancel", task.TaskID, true))
			require.True(t, again, "cancelling twice acknowledges the same")

			// The daemon starts and takes the command: its result is the
			// cancellation, and the target is never called.
			results, err := d.NC.SubscribeSync(wire.ResultSubject(operation.TypePaymentCharge))
			require.NoError(t, err)
			defer results.Unsubscribe()
			require.NoError(t, d.NC.Flush())
			d.Run(t)
			for {
				m, err := results.NextMsg(30 * time.Second)
				require.NoError(t, err, "the daemon answers the cancelled command")
				var r operation.Result
				require.NoError(t, json.Unmarshal(m.Data, &r))
				if r.OperationKey == task.TaskID {
					require.Equal(t, operation.ResultFailedFinal, r.Status)
					require.Equal(t, gateway.CodeCancelled, r.ErrorCode)
					break
				}
			}
			require.Equal(t, 0, d.YooKassa.TotalEffects(), "no payment, ever")
			require.Equal(t, gateway.TaskCancelled, getTask(t, s.url, task.TaskID).Status)

			a := call(t, connect(t, s.url), "payment_charge", chargeArgs("cancel-me", "order-c", 125000))
			require.Equal(t, gateway.StatusFailedFinal, a.Status, "%+v", a)
			require.Equal(t, gateway.NewIntentRequired, a.NextAction)
			require.Contains(t, a.Reason, "cancelled before anything was sent")
			require.Equal(t, 0, d.YooKassa.TotalEffects())
		})
	}
}

// TestCancelRefusedWhenTheEffectMayExist: a charge whose answer YooKassa
// lost has been claimed and sent; tasks/cancel is acknowledged but refused,
// saying the payment may already exist, and the task goes on to the
// payment the lookup finds.
func TestCancelRefusedWhenTheEffectMayExist(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	s := serve(t, d, gateway.Config{PollAfter: 200 * time.Millisecond}, gwmcp.Options{TaskWait: 300 * time.Millisecond})
	require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))

	task := createdTask(t, callAsTaskClient(t, s.url, "payment_charge", chargeArgs("too-late", "order-tl2", 7000), true))
	require.Equal(t, gateway.TaskWorking, task.Status)
	require.NotContains(t, task.StatusMessage, "queued", "claimed: the call went out")

	cancelled, effectPossible, reason := cancelAck(t, taskMethod(t, s.url, "tasks/cancel", task.TaskID, true))
	require.False(t, cancelled)
	require.True(t, effectPossible)
	require.Contains(t, reason, "may already exist")

	done := followTask(t, s.url, task.TaskID)
	require.Equal(t, gateway.TaskCompleted, done.Status, "not cancelled: the task goes on")
	require.Equal(t, gateway.StatusSucceeded, resultAnswer(t, done).Status)
	require.Equal(t, 1, d.YooKassa.TotalEffects())

	late, effectPossible, reason := cancelAck(t, taskMethod(t, s.url, "tasks/cancel", task.TaskID, true))
	require.False(t, late)
	require.True(t, effectPossible)
	require.Contains(t, reason, "already final")
}

// TestTaskOnASessionRevision: a 2025-11-25 client that declared the Tasks
// extension in initialize gets a pending call as a task too, and reads it
// with tasks/get on its session.
func TestTaskOnASessionRevision(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	s := serve(t, d, gateway.Config{PollAfter: 200 * time.Millisecond}, gwmcp.Options{TaskWait: 300 * time.Millisecond})
	require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseHang, Scope: sandbox.ScopeCreate, Count: 1}))

	caps := map[string]any{"extensions": map[string]any{gwmcp.ExtensionTasks: map[string]any{}}}
	init := postSession(t, s.url, "", "initialize", map[string]any{"protocolVersion": gwmcp.RevisionLegacy, "capabilities": caps,
		"clientInfo": map[string]any{"name": "session-agent", "version": "1"}})
	session := init.header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session, "%s", init.body)
	defer func() { // the session ends as its client ends it
		req, err := http.NewRequest(http.MethodDelete, s.url, nil)
		require.NoError(t, err)
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", gwmcp.RevisionLegacy)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
	}()
	postSession(t, s.url, session, "notifications/initialized", nil)

	created := postSession(t, s.url, session, "tools/call", map[string]any{"name": "payment_charge", "arguments": chargeArgs("session-task", "order-st", 3000)})
	task := createdTask(t, created)
	require.Equal(t, "test:payment.charge:session-task:v1", task.TaskID)

	var got wireTask
	deadline := time.Now().Add(time.Minute)
	for {
		res := postSession(t, s.url, session, "tasks/get", map[string]any{"taskId": task.TaskID})
		require.Nil(t, res.err, "%s", res.body)
		got = wireTask{}
		require.NoError(t, json.Unmarshal(res.result, &got))
		if got.Status != gateway.TaskWorking || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Duration(got.PollIntervalMs) * time.Millisecond) // the task's poll interval
	}
	require.Equal(t, gateway.TaskCompleted, got.Status)
	require.Equal(t, gateway.StatusSucceeded, resultAnswer(t, got).Status)
	require.Equal(t, 1, d.YooKassa.TotalEffects())
}

// postSession sends one JSON-RPC message of the 2025-11-25 revision on a
// session (none for initialize); a notification when params is nil.
func postSession(t *testing.T, url, session, method string, params map[string]any) rpcResponse {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["id"], msg["params"] = 1, params
	}
	body, err := json.Marshal(msg)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", gwmcp.RevisionLegacy)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	return readRPC(t, res)
}

// TestProcessAsTask: a checkout called by a client that declared the Tasks
// extension becomes a task named by the process key; tasks/get says
// working while its steps run and completed with the process's answer
// (each step's object in it); tasks/cancel refuses it — a process is undone
// by its compensations, not stopped halfway — and the effects are one per
// step.
func TestProcessAsTask(t *testing.T) {
	d := daemontest.StartWith(t, daemontest.SQLite, daemontest.Options{Processes: map[string]process.Decl{"order.checkout": daemontest.Checkout()}})
	d.StartCoordinator(t, "coord-task", nil)
	s := serve(t, d, gateway.Config{PollAfter: 200 * time.Millisecond, Wait: 100 * time.Millisecond}, gwmcp.Options{TaskWait: 100 * time.Millisecond})
	// The charge is slow: the call is still running when the tool's wait
	// ends.
	require.NoError(t, d.YooKassa.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Scope: sandbox.ScopeCreate, Delay: 1500 * time.Millisecond, Count: 1}))
	args := map[string]any{"intent_id": "task-checkout", "approval_id": "appr-task-checkout", "order_id": "o-task", "customer_id": "cust-17",
		"account_id": "card-ok", "amount_minor": 125000, "currency": "RUB", "responsible_id": "12"}
	task := createdTask(t, callAsTaskClient(t, s.url, "process_order_checkout", args, true))
	require.Equal(t, "test:process.order.checkout:task-checkout:v1", task.TaskID, "the task id is the process key")
	require.Equal(t, gateway.TaskWorking, task.Status)

	ack := taskMethod(t, s.url, "tasks/cancel", task.TaskID, true)
	require.Nil(t, ack.err, "%s", ack.body)
	cancelled, effectPossible, reason := cancelAck(t, ack)
	require.False(t, cancelled)
	require.True(t, effectPossible)
	require.Contains(t, reason, "a process is not cancelled once handed to the daemon")

	done := followTask(t, s.url, task.TaskID)
	require.Equal(t, gateway.TaskCompleted, done.Status, "%+v", done)
	a := resultAnswer(t, done)
	require.Equal(t, gateway.StatusSucceeded, a.Status, "%+v", a)
	require.Equal(t, task.TaskID, a.OperationKey)
	var v process.View
	require.NoError(t, json.Unmarshal(a.Result, &v))
	require.Equal(t, journal.ProcessSucceeded, v.Status)
	for _, st := range v.Steps {
		require.Equal(t, "succeeded", st.Status, "%s", st.Name)
		require.NotEmpty(t, st.TargetObjectID, "%s", st.Name)
	}
	require.Equal(t, 1, d.OneC.TotalEffects())
	require.Equal(t, 1, d.YooKassa.TotalEffects())
	require.Equal(t, 1, d.Bitrix24.TotalEffects())

	// The tool called again: replayed, the same steps.
	again := call(t, connect(t, s.url), "process_order_checkout", args)
	require.True(t, again.Replayed)
	require.Equal(t, a.Result, again.Result)
	require.Equal(t, 1, d.YooKassa.TotalEffects())
}

// taskMeta is a current-revision request's _meta from a client that
// declared the Tasks extension and, when elicit is set, URL-mode
// elicitation.
func taskMeta(elicit bool) map[string]any {
	m := meta(gwmcp.RevisionCurrent, true)
	if elicit {
		m[sdk.MetaKeyClientCapabilities].(map[string]any)["elicitation"] = map[string]any{"url": map[string]any{}}
	}
	return m
}

// inputTask is a task with its outstanding input requests, as tasks/get
// puts them on the wire.
type inputTask struct {
	wireTask
	InputRequests map[string]struct {
		Method string           `json:"method"`
		Params sdk.ElicitParams `json:"params"`
	} `json:"inputRequests"`
}

func getInputTask(t *testing.T, url, id string, elicit bool) inputTask {
	t.Helper()
	res := post(t, url, gwmcp.RevisionCurrent, "tasks/get", id, map[string]any{"taskId": id, "_meta": taskMeta(elicit)})
	require.Nil(t, res.err, "%s", res.body)
	var it inputTask
	require.NoError(t, json.Unmarshal(res.result, &it), "%s", res.result)
	require.Equal(t, "complete", it.ResultType)
	require.Equal(t, id, it.TaskID)
	return it
}

// TestTaskAsksForTheApproval: a charge that waits for a person's approval,
// called as a task by a client that declared URL-mode elicitation, is an
// input_required task whose one input request is the approval page (the
// operation key as the elicitation id). Nothing executes until an approver
// decides there. The client's answer (tasks/update) is recorded on the
// task, so the request is never asked again — on any read, by any client
// — and the task goes back to working; an answer to a request never asked
// is ignored. A client without URL-mode elicitation reads the same task as
// working. Once approved, the task completes with one charge.
func TestTaskAsksForTheApproval(t *testing.T) {
	d := daemontest.StartWith(t, daemontest.SQLite, daemontest.Options{Approvals: true})
	link := func(k string) string { return "https://idemgate.example/ui/approvals/" + k }
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, PollAfter: 200 * time.Millisecond},
		gateway.Deps{NC: d.NC, Journal: d.Journal, Cancels: d.Journal, Routed: d.Routes, ApprovalURL: link})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv, err := gwmcp.NewServer(g, gwmcp.Options{Version: "test", TaskWait: 300 * time.Millisecond, ElicitApprovals: true})
	require.NoError(t, err)
	hs := httptest.NewServer(gwmcp.Handler(srv, gwmcp.HTTPOptions{}))
	t.Cleanup(hs.Close)
	url := hs.URL + gwmcp.Path

	res := post(t, url, gwmcp.RevisionCurrent, "tools/call", "payment_charge", map[string]any{"name": "payment_charge",
		"arguments": chargeArgs("task-approval", "order-ta", 125000), "_meta": taskMeta(true)})
	require.Nil(t, res.err, "%s", res.body)
	task := createdTask(t, res)
	key := daemontest.Env + ":payment.charge:task-approval:v1"
	require.Equal(t, key, task.TaskID)

	var asked inputTask
	deadline := time.Now().Add(time.Minute)
	for {
		asked = getInputTask(t, url, key, true)
		if asked.Status != gateway.TaskWorking || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Duration(asked.PollIntervalMs) * time.Millisecond)
	}
	require.Equal(t, "input_required", asked.Status, "%+v", asked)
	require.Len(t, asked.InputRequests, 1)
	req := asked.InputRequests["approval"]
	require.Equal(t, "elicitation/create", req.Method)
	require.Equal(t, "url", req.Params.Mode)
	require.Equal(t, link(key), req.Params.URL)
	require.Equal(t, key, req.Params.ElicitationID)
	require.Contains(t, req.Params.Message, "waits for a person's approval")
	require.Contains(t, asked.StatusMessage, "tasks/update")
	require.Contains(t, asked.StatusMessage, "waits for a person's approval", "the answer's reason")
	require.Nil(t, asked.Result)

	// A deployment that does not ask approvals through MCP never asks.
	quiet, err := gwmcp.NewServer(g, gwmcp.Options{Version: "test", TaskWait: 300 * time.Millisecond})
	require.NoError(t, err)
	qs := httptest.NewServer(gwmcp.Handler(quiet, gwmcp.HTTPOptions{}))
	t.Cleanup(qs.Close)
	notAsked := getInputTask(t, qs.URL+gwmcp.Path, key, true)
	require.Equal(t, gateway.TaskWorking, notAsked.Status, "without mcp.elicit_approvals a waiting task is working")
	require.Empty(t, notAsked.InputRequests)

	plain := getInputTask(t, url, key, false)
	require.Equal(t, gateway.TaskWorking, plain.Status, "a client without URL elicitation is not asked")
	require.Empty(t, plain.InputRequests)
	require.Contains(t, plain.StatusMessage, "waits for a person's approval")

	update := func(responses map[string]any) {
		t.Helper()
		// The update's own _meta need not declare elicitation: the request
		// is the task's, outstanding until answered.
		res := post(t, url, gwmcp.RevisionCurrent, "tasks/update", key, map[string]any{"taskId": key,
			"inputResponses": responses, "_meta": taskMeta(false)})
		require.Nil(t, res.err, "%s", res.body)
		var ack struct {
			ResultType    string          `json:"resultType"`
			InputRequests json.RawMessage `json:"inputRequests"`
		}
		require.NoError(t, json.Unmarshal(res.result, &ack), "%s", res.result)
		require.Equal(t, "complete", ack.ResultType, "the empty acknowledgement")
		require.Empty(t, ack.InputRequests)
	}
	bad := post(t, url, gwmcp.RevisionCurrent, "tasks/update", key, map[string]any{"taskId": key,
		"inputResponses": map[string]any{"approval": 5}, "_meta": taskMeta(true)})
	require.NotNil(t, bad.err, "a response that is no response is refused: %s", bad.body)
	require.Equal(t, "input_required", getInputTask(t, url, key, true).Status, "and records nothing")
	update(map[string]any{"not-asked": map[string]any{"action": "accept"}})
	require.Equal(t, "input_required", getInputTask(t, url, key, true).Status, "an answer to a request never asked is ignored")

	update(map[string]any{"approval": map[string]any{"action": "accept"}})
	again := getInputTask(t, url, key, true)
	require.Equal(t, gateway.TaskWorking, again.Status, "an answered request is not asked again")
	require.Empty(t, again.InputRequests)
	update(map[string]any{"approval": map[string]any{"action": "accept"}}) // answered twice: nothing changes
	require.Equal(t, gateway.TaskWorking, getInputTask(t, url, key, true).Status)
	require.Equal(t, 0, d.YooKassa.TotalEffects(), "nothing executes before an approver decides")

	_, err = d.Approvals.Decide(context.Background(), "alice", key, journal.VoteApprove, "confirmed with the customer")
	require.NoError(t, err)
	done := followTask(t, url, key)
	require.Equal(t, gateway.TaskCompleted, done.Status)
	require.Equal(t, gateway.StatusSucceeded, resultAnswer(t, done).Status)
	require.Equal(t, 1, d.YooKassa.TotalEffects())
}
