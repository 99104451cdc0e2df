package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// checkoutYAML declares the worked checkout process.
const checkoutYAML = `
processes:
  order.checkout:
    input:
      fields:
        - {name: order_id, kind: string, required: true}
        - {name: customer_id, kind: string, required: true}
        - {name: account_id, kind: string, required: true}
        - {name: amount_minor, kind: money, required: true}
        - {name: currency, kind: currency, required: true}
        - {name: responsible_id, kind: string, required: true}
    steps:
      - name: invoice
        operation: invoice.create
        payload: {order_id: "${input.order_id}", customer_id: "${input.customer_id}", amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
        compensate:
          operation: invoice.cancel
          payload: {invoice_id: "${steps.invoice.target_object_id}", order_id: "${input.order_id}", reason: "checkout compensated"}
      - name: charge
        operation: payment.charge
        payload: {account_id: "${input.account_id}", order_id: "${input.order_id}", amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
        compensate:
          operation: payment.refund
          payload: {payment_id: "${steps.charge.target_object_id}", order_id: "${input.order_id}", amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
      - name: shipping
        operation: crm.task.create
        payload: {title: "Ship order ${input.order_id}", responsible_id: "${input.responsible_id}", customer_id: "${input.customer_id}"}
`

// TestProcessDeclarationLoads: the worked example loads from the file and
// compiles.
func TestProcessDeclarationLoads(t *testing.T) {
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, checkoutYAML)))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	reg, err := c.registry()
	require.NoError(t, err)
	set, err := c.processes(reg)
	require.NoError(t, err)
	def, ok := set.Lookup("order.checkout")
	require.True(t, ok)
	require.Len(t, def.Steps, 3)
	require.Equal(t, "payment.refund", def.Steps[1].Compensation.Operation)
}

// TestProcessDeclarationsExit78: a template naming an unknown field or
// step, a compensation whose type does not exist, a forward reference (the
// only cycle ordered steps can make) stop `idemgate run` at start with
// exit 78 and a message naming the key at fault.
func TestProcessDeclarationsExit78(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"unknown input field": {`"${input.customer_id}", amount_minor`, `"${input.customer}", amount_minor`,
			"processes.order.checkout.steps.invoice: ${input.customer} names input field customer, which the input does not declare"},
		"unknown step": {`"${steps.charge.target_object_id}"`, `"${steps.payment.target_object_id}"`,
			"${steps.payment.target_object_id} names step payment, which the process does not have"},
		"unknown compensation type": {"operation: invoice.cancel", "operation: invoice.annul",
			"processes.order.checkout.steps.invoice.compensate.operation: the compensation's operation type invoice.annul does not exist"},
		"forward reference": {`title: "Ship order ${input.order_id}"`, `title: "Ship order ${steps.shipping.target_object_id}"`,
			"a step cannot wait on itself (a cycle)"},
		"later step": {`reason: "checkout compensated"`, `reason: "${steps.shipping.target_object_id}"`,
			"names step shipping, which runs later"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			yaml := strings.Replace(checkoutYAML, tc.from, tc.to, 1)
			require.NotEqual(t, checkoutYAML, yaml)
			p := writeConfig(t, "data_dir: "+t.TempDir()+"\nadmin:\n  addr: \"\"\n"+yaml)
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			code := run(ctx, []string{"run", "--config", p}, &stdout, &stderr)
			require.Equal(t, exitConfig, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}

// brokenUndoYAML declares a process whose compensation cannot succeed: it
// cancels an invoice that does not exist, so a failed charge leaves the
// process for a person.
const brokenUndoYAML = `
  order.broken_undo:
    input:
      fields:
        - {name: order_id, kind: string, required: true}
        - {name: account_id, kind: string, required: true}
    steps:
      - name: invoice
        operation: invoice.create
        payload: {order_id: "${input.order_id}", customer_id: "cust-1", amount_minor: 1000, currency: RUB}
        compensate:
          operation: invoice.cancel
          payload: {invoice_id: "missing-${input.order_id}"}
      - name: charge
        operation: payment.charge
        payload: {account_id: "${input.account_id}", order_id: "${input.order_id}", amount_minor: 1000, currency: RUB}
`

// TestProcessPublishTraceAndReview: a daemon runs the declared checkout
// against the emulators; idemgate publish sends it and waits (exit 0
// succeeded, 5 once compensated); idemgate trace shows the process and its
// steps as one timeline; a process whose compensation failed is listed by
// trace --unresolved.
func TestProcessPublishTraceAndReview(t *testing.T) {
	t.Parallel()
	sb := startProcessSandboxes(t)
	loaded, err := loadConfig(flagsWith(t, "--config", writeConfig(t, checkoutYAML+brokenUndoYAML)))
	require.NoError(t, err)
	c := testDaemonConfig(t)
	c.Processes = loaded.Processes
	sb.configure(&c)
	c.Coordinator.StepWait = 5 * time.Second
	c.Console.Enabled = true
	c.Console.Users = consoleUsers()
	d := startDaemon(t, c, &lockedWriter{w: &bytes.Buffer{}})
	require.NotNil(t, d.coordinator)
	tool := func(args ...string) (int, string, string) {
		return runTool(t, append(args, "--env", "test", "--data-dir", c.DataDir, "--nats-url", "nats://"+d.natsAddr,
			"--config", writeConfig(t, checkoutYAML+brokenUndoYAML))...)
	}
	checkout := func(intent, account, responsible string) []string {
		return []string{"publish", "--operation", "process.order.checkout", "--event", "evt-" + intent, "--intent", intent,
			"--approval", "appr-" + intent, "--wait", "--timeout", "60s",
			"--payload", `{"order_id":"` + intent + `","customer_id":"cust-17","account_id":"` + account +
				`","amount_minor":125000,"currency":"RUB","responsible_id":"` + responsible + `"}`}
	}

	code, out, errOut := tool(checkout("o-happy", "card-ok", "12")...)
	require.Equal(t, exitOK, code, errOut)
	var r operation.Result
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Equal(t, "test:process.order.checkout:o-happy:v1", r.OperationKey)
	require.Equal(t, operation.ResultSucceeded, r.Status)

	code, out, errOut = tool(checkout("o-declined", sbyookassa.MethodDeclined, "12")...)
	require.Equal(t, exitFailedFinal, code, errOut)
	require.Contains(t, out, `"process_status": "compensated"`)

	code, out, errOut = tool("trace", "test:process.order.checkout:o-declined:v1")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `(?m)^status\s+compensated$`, out)
	require.Regexp(t, `(?m)^failed\s+step charge \(declined\)$`, out)
	require.Regexp(t, `(?m)^invoice/compensate\s+invoice\.cancel\s+succeeded\s`, out)
	require.Regexp(t, `(?m)^charge\s+payment\.charge\s+failed_final\s+-\s+declined\s`, out)
	require.Regexp(t, `(?m)^shipping\s+crm\.task\.create\s+not_started\s`, out)
	// One timeline: the process's start, each attempt, its end, in order.
	require.Regexp(t, `(?s)\sprocess\s+started\s.*\sinvoice\s+execute\s.*\scharge\s+execute\s.*\sinvoice/compensate\s+execute\s.*\sprocess\s+compensated\s`, out)

	// The console shows the same process: its steps beside their
	// operations, and one timeline; an operation page asked for a process
	// key leads there.
	viewer := loginConsole(t, "http://"+d.adminAddr, consoleToken)
	pkey := "test:process.order.checkout:o-declined:v1"
	status, page := viewer.do("GET", "/ui/process?key="+url.QueryEscape(pkey), nil)
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, `id="proc-status">compensated<`)
	require.Contains(t, page, `id="proc-failed">charge<`)
	require.Contains(t, page, `id="proc-next">human_review<`)
	require.Regexp(t, `<td>invoice/compensate</td><td>invoice\.cancel</td><td><span class="status succeeded">succeeded</span>`, page)
	require.Regexp(t, `<td>shipping</td><td>crm\.task\.create</td><td><span class="status not_started">not_started</span>`, page)
	require.Regexp(t, `(?s)<td>process</td><td>started</td>.*<td>invoice</td><td>execute</td>.*<td>charge</td><td>execute</td>.*<td>invoice/compensate</td><td>execute</td>.*<td>process</td><td>compensated</td>`, page)
	status, _ = viewer.do("GET", "/ui/operation?key="+url.QueryEscape(pkey), nil)
	require.Equal(t, http.StatusSeeOther, status)
	status, _ = viewer.do("GET", "/ui/process?key="+url.QueryEscape("test:process.order.checkout:o-none:v1"), nil)
	require.Equal(t, http.StatusNotFound, status)

	code, out, errOut = tool("trace", "test:process.order.checkout:o-declined:v1", "--json")
	require.Equal(t, exitOK, code, errOut)
	var tr struct {
		Process  struct{ Status string }       `json:"process"`
		Steps    []process.StepView            `json:"steps"`
		Timeline []struct{ Step, Kind string } `json:"timeline"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &tr))
	require.Equal(t, "compensated", tr.Process.Status)
	require.Len(t, tr.Steps, 3)
	require.Equal(t, "succeeded", tr.Steps[0].Compensation.Status)

	code, out, errOut = tool("publish", "--operation", "process.order.broken_undo", "--event", "evt-o-broken", "--intent", "o-broken",
		"--approval", "appr-o-broken", "--wait", "--timeout", "60s",
		"--payload", `{"order_id":"o-broken","account_id":"`+sbyookassa.MethodDeclined+`"}`)
	require.Equal(t, exitFailedFinal, code, errOut)
	require.Contains(t, out, `"error_code": "process_needs_review"`)
	code, out, errOut = tool("trace", "--unresolved")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `(?m)^test:process\.order\.broken_undo:o-broken:v1\s+needs_review\s+-\s+validation_error\s.*process step invoice could not be compensated`, out)

	code, _, errOut = tool("trace", "test:process.order.checkout:o-none:v1")
	require.Equal(t, exitUnknown, code, errOut)

	// A person settles the process in the targets by hand, then records it:
	// the process leaves the review list, its answer becomes the
	// settlement on every face, and trace shows who, when and why.
	broken := "test:process.order.broken_undo:o-broken:v1"
	code, _, errOut = tool("resolve", broken, "--as", "compensated", "--operator", "alice")
	require.Equal(t, exitUsage, code, "no evidence: %s", errOut)
	require.Contains(t, errOut, "needs evidence")
	code, _, errOut = tool("resolve", broken, "--as", "compensated", "--object", "x", "--evidence", "e", "--operator", "alice")
	require.Equal(t, exitUsage, code, errOut)
	code, _, errOut = tool("resolve", broken, "--as", "failed_final", "--evidence", "e", "--operator", "alice")
	require.Equal(t, exitUsage, code, errOut)
	code, _, errOut = tool("resolve", "test:process.order.checkout:o-declined:v1", "--as", "compensated", "--evidence", "e", "--operator", "alice")
	require.Equal(t, exitFailure, code, "a compensated process needs no person: %s", errOut)
	require.Contains(t, errOut, "only a process left for review")
	code, _, errOut = tool("resolve", "test:process.order.broken_undo:o-none:v1", "--as", "compensated", "--evidence", "e", "--operator", "alice")
	require.Equal(t, exitUnknown, code, errOut)
	code, out, errOut = tool("resolve", broken, "--as", "compensated", "--operator", "alice",
		"--evidence", "invoice of o-broken cancelled by hand in 1C, document 0042")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, broken+" settled as compensated by alice")
	require.Contains(t, out, "result published: compensated")
	code, out, errOut = tool("trace", "--unresolved")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, out, broken)
	code, out, errOut = tool("trace", broken)
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `(?m)^status\s+compensated$`, out)
	require.Regexp(t, `(?m)^resolved\s+as compensated by alice at \S+\nevidence\s+invoice of o-broken cancelled by hand in 1C, document 0042$`, out)
	require.Regexp(t, `(?s)\sinvoice/compensate\s+execute\s.*\sprocess\s+resolved_as_compensated\s+operator:alice\s`, out)
	// The command sent again (a new event, the same intent) is answered
	// with the settlement.
	code, out, errOut = tool("publish", "--operation", "process.order.broken_undo", "--event", "evt-o-broken-again", "--intent", "o-broken",
		"--approval", "appr-o-broken", "--wait", "--timeout", "60s",
		"--payload", `{"order_id":"o-broken","account_id":"`+sbyookassa.MethodDeclined+`"}`)
	require.Equal(t, exitFailedFinal, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.True(t, r.Replayed)
	require.Equal(t, "human_review", r.NextAction)
	require.Contains(t, r.Reason, "a person undid what it had done", out+errOut)
	require.Contains(t, r.Reason, "alice settled it in the targets by hand")
	var settled process.View
	require.NoError(t, json.Unmarshal(r.Result, &settled))
	require.Equal(t, journal.ProcessCompensated, settled.Status)
	require.NotNil(t, settled.Resolution)
	require.Equal(t, "alice", settled.Resolution.Operator)
	require.NotContains(t, out, "document 0042", "the evidence stays in the journal")
	code, _, errOut = tool("resolve", broken, "--as", "succeeded", "--evidence", "changed my mind", "--operator", "alice")
	require.Equal(t, exitFailure, code, "settled once: %s", errOut)

	// The console settles one too: the form on the process page of an
	// operator, refused without evidence, then recorded.
	code, _, errOut = tool("publish", "--operation", "process.order.broken_undo", "--event", "evt-o-broken-2", "--intent", "o-broken-2",
		"--approval", "appr-o-broken-2", "--wait", "--timeout", "60s",
		"--payload", `{"order_id":"o-broken-2","account_id":"`+sbyookassa.MethodDeclined+`"}`)
	require.Equal(t, exitFailedFinal, code, errOut)
	broken2 := "test:process.order.broken_undo:o-broken-2:v1"
	status, page = viewer.do("GET", "/ui/process?key="+url.QueryEscape(broken2), nil)
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, `id="proc-resolve"`)
	status, page = viewer.do("POST", "/ui/process/resolve", url.Values{"key": {broken2}, "as": {"succeeded"}})
	require.Equal(t, http.StatusBadRequest, status, page)
	require.Contains(t, page, "needs evidence")
	status, _ = viewer.do("POST", "/ui/process/resolve", url.Values{"key": {broken2}, "as": {"succeeded"},
		"evidence": {"charge of o-broken-2 made by hand in the YooKassa cabinet"}})
	require.Equal(t, http.StatusSeeOther, status)
	status, page = viewer.do("GET", "/ui/process?key="+url.QueryEscape(broken2)+"&resolved=1&published=1", nil)
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, `id="proc-status">succeeded<`)
	require.Contains(t, page, `id="proc-next">done<`)
	require.Regexp(t, `id="proc-resolved"><b>olga</b> at [^,]+, as succeeded: charge of o-broken-2 made by hand`, page)
	require.Contains(t, page, "Settled as succeeded")
	require.NotContains(t, page, `id="proc-resolve"`, "nothing left to settle")
	status, page = viewer.do("POST", "/ui/process/resolve", url.Values{"key": {broken2}, "as": {"compensated"}, "evidence": {"x"}})
	require.Equal(t, http.StatusConflict, status, page)

	metrics := httpGet(t, "http://"+d.adminAddr+"/metrics")
	for _, line := range []string{
		`idemgate_processes_total{process="order.checkout",status="succeeded"} 1`,
		`idemgate_processes_total{process="order.checkout",status="compensated"} 1`,
		`idemgate_processes_total{process="order.broken_undo",status="needs_review"} 2`,
		`idemgate_process_steps_total{kind="step",outcome="failed",process="order.checkout",step="charge"} 1`,
		`idemgate_process_steps_total{kind="compensation",outcome="failed",process="order.broken_undo",step="invoice"} 2`,
		`idemgate_process_commands_held 0`,
	} {
		require.Contains(t, metrics, line)
	}
}

// shortAckWait is the horizons of the end-to-end suite's daemons.
const shortAckWait = "nats: {ack_wait: 6s}\nworker: {lease_ttl: 4s, call_timeout: 2500ms, heartbeat_interval: 1s, retry: {in_lease: 3s}}\n"

// TestCoordinatorHeartbeatFollowsAckWait: left at 0, the coordinator's
// heartbeat beats three times per nats.ack_wait (a short ack_wait needs no
// coordinator setting); one set too long for it is refused at start.
func TestCoordinatorHeartbeatFollowsAckWait(t *testing.T) {
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, shortAckWait+checkoutYAML)))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	require.Equal(t, 2*time.Second, c.Coordinator.WithConsumer(c.NATS.Config).HeartbeatInterval)
	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, shortAckWait+"coordinator: {heartbeat_interval: 10s}\n")))
	require.NoError(t, err)
	require.ErrorContains(t, c.validate(), "coordinator.heartbeat_interval 10s: at most half of nats.ack_wait 6s")
}
