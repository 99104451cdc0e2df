// The process workload: a declared checkout (an invoice in 1C, a charge in
// YooKassa, a shipping task in Bitrix24; the invoice cancelled and the
// charge refunded when a later step fails) sent among the operations, with
// copies, while the nemesis runs. Its steps and compensations are ordinary
// operations with keys derived from the process's, so the per-intent
// invariants hold for each of them; the process invariants check what a
// process is for: each step's and compensation's effect at most once, a
// compensation only for a step that made its effect, the ledgers netting
// as the process's state says, and every process at rest.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// The checkout the daemons declare.
const (
	processName = "order.checkout"
	processOp   = "process." + processName
	// responsibleNone is refused by Bitrix24 (a responsible that is not a
	// user id): the shipping step fails for good after the money moved.
	responsibleNone = "nobody"
)

// processStep is one step of the checkout: its operation, target and
// compensation ("" for none).
type processStep struct{ name, op, target, compOp string }

// checkoutSteps are the checkout's steps, in order.
var checkoutSteps = []processStep{
	{"invoice", operation.TypeInvoiceCreate, "onec", operation.TypeInvoiceCancel},
	{"charge", operation.TypePaymentCharge, "yookassa", operation.TypePaymentRefund},
	{"shipping", operation.TypeTaskCreate, "bitrix24", ""},
}

// processesYAML declares the checkout (amounts stay under the approval
// threshold: the approval workload is the charges').
const processesYAML = `processes:
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
        payload: {order_id: "${input.order_id}", customer_id: "${input.customer_id}",
                  amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
        compensate:
          operation: invoice.cancel
          payload: {invoice_id: "${steps.invoice.target_object_id}", order_id: "${input.order_id}",
                    reason: "checkout ${process.intent_id} not completed"}
      - name: charge
        operation: payment.charge
        payload: {account_id: "${input.account_id}", order_id: "${input.order_id}",
                  amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
        compensate:
          operation: payment.refund
          payload: {payment_id: "${steps.charge.target_object_id}", order_id: "${input.order_id}",
                    amount_minor: "${input.amount_minor}", currency: "${input.currency}"}
      - name: shipping
        operation: crm.task.create
        payload: {title: "Ship order ${input.order_id}", responsible_id: "${input.responsible_id}",
                  customer_id: "${input.customer_id}"}
`

// processInput is a checkout's input: three in five go through, one in
// five has its card declined (the invoice is cancelled), one in five has
// its shipping refused after the charge (refunded, then cancelled).
func (w *workload) processInput(intent string) json.RawMessage {
	account, responsible := "merchant-account-17", "7"
	switch n := w.intn(5); n {
	case 0:
		account = sbyookassa.MethodDeclined
	case 1:
		responsible = responsibleNone
	}
	b, _ := json.Marshal(map[string]any{"order_id": "o-" + intent, "customer_id": fmt.Sprintf("c-%d", w.intn(50)),
		"account_id": account, "amount_minor": 10000 + w.intn(70000)*10, "currency": "RUB", "responsible_id": responsible})
	return b
}

// processKey is a checkout's key in env.
func processKey(env, intent string) string { return env + ":" + processOp + ":" + intent + ":v1" }

// stepKeys are the keys of a process's steps and compensations (journal
// form), each with what it is.
type stepKey struct {
	process, step, op, target string
	comp                      bool
}

// keysOf lists the step and compensation keys of the process key pk
// (<env>:process.<name>:<intent>:v1), as the daemon derives them.
func keysOf(pk string) []stepKey {
	env, rest, _ := strings.Cut(pk, ":")
	base := strings.TrimSuffix(rest, ":v1") // process.<name>:<intent>
	var out []stepKey
	for _, s := range checkoutSteps {
		out = append(out, stepKey{process: env + ":" + s.op + ":" + base + ":v1:" + s.name + ":v1", step: s.name, op: s.op, target: s.target})
		if s.compOp != "" {
			out = append(out, stepKey{process: env + ":" + s.compOp + ":" + base + ":v1:" + s.name + ":compensate:v1", step: s.name, op: s.compOp,
				target: s.target, comp: true})
		}
	}
	return out
}

// targetMaxKey is the longest key each emulator's adapter sends as it is
// (longer ones go as their digest, adapters.TargetKey).
var targetMaxKey = map[string]int{"onec": 100, "yookassa": 64, "bitrix24": 100}

// ProcessRow is one process's record in the journal after settling.
type ProcessRow struct {
	Key        string `json:"key"`
	Status     string `json:"status"`
	FailedStep string `json:"failed_step,omitempty"`
	ErrorCode  string `json:"error_code,omitempty"`
}

// processRows reads the process records.
func processRows(ctx context.Context, tx pgx.Tx) ([]ProcessRow, error) {
	rows, err := tx.Query(ctx, `SELECT process_key, status, failed_step, error_code FROM process_log`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ProcessRow
	for rows.Next() {
		var r ProcessRow
		if err := rows.Scan(&r.Key, &r.Status, &r.FailedStep, &r.ErrorCode); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// proc is what the checker knows of one process.
type proc struct {
	key     string
	msgs    []Sent
	results []ResultMsg
	row     *ProcessRow
	// steps are its step and compensation keys, each's intent filled in
	// by the per-intent pass.
	steps []stepKey
}

// processIndex splits the process messages out of h.Sent and names every
// step and compensation key (journal form and each target's) of the
// processes sent.
type processIndex struct {
	procs map[string]*proc
	// alias maps a key as a target holds it (a digest) to the journal's.
	alias map[string]string
	// stepOf maps a step or compensation key to its process.
	stepOf map[string]*proc
}

func indexProcesses(h History) (processIndex, []Sent) {
	ix := processIndex{procs: map[string]*proc{}, alias: map[string]string{}, stepOf: map[string]*proc{}}
	var ops []Sent
	for _, s := range h.Sent {
		if s.Op != processOp {
			ops = append(ops, s)
			continue
		}
		p := ix.procs[s.Key]
		if p == nil {
			p = &proc{key: s.Key, steps: keysOf(s.Key)}
			ix.procs[s.Key] = p
			for _, k := range p.steps {
				ix.stepOf[k.process] = p
				ix.alias[adapters.TargetKey(k.process, targetMaxKey[k.target])] = k.process
			}
		}
		p.msgs = append(p.msgs, s)
	}
	for i := range h.Processes {
		if p := ix.procs[h.Processes[i].Key]; p != nil {
			p.row = &h.Processes[i]
		}
	}
	for _, r := range h.Results {
		if p := ix.procs[r.Key]; p != nil {
			p.results = append(p.results, r)
		}
	}
	return ix, ops
}

// journalKey is an effect's key as the journal names it.
func (ix processIndex) journalKey(k string) string {
	if j, ok := ix.alias[k]; ok {
		return j
	}
	return k
}

// checkProcesses runs the process invariants; byKey holds the per-intent
// view of every step and compensation key.
func (c *checker) checkProcesses(ix processIndex, byKey map[string]*intent, rep *Report) {
	for _, r := range c.h.Processes {
		if ix.procs[r.Key] == nil {
			c.breach(InvPhantom, r.Key, "process record (%s) without a command", r.Status)
		}
	}
	for _, key := range sortedKeys(ix.procs) {
		p := ix.procs[key]
		rep.Counts.Processes++
		if p.row == nil {
			c.breach(InvProcessSettled, p.key, "no process record (%d commands sent)", len(p.msgs))
			continue
		}
		rep.Counts.ProcessFinal[p.row.Status]++
		switch p.row.Status {
		case "running", "compensating":
			c.breach(InvProcessSettled, p.key, "still %s after settling", p.row.Status)
		}
		final := false
		for _, r := range p.results {
			final = final || r.Status == "succeeded" || r.Status == "failed_final"
		}
		for _, m := range p.msgs {
			final = final || (m.Reply != nil && (m.Reply.Status == "succeeded" || m.Reply.Status == "failed_final"))
		}
		if !final && (p.row.Status != "running" && p.row.Status != "compensating") {
			c.breach(InvProcessSettled, p.key, "at rest (%s) but no final answer published", p.row.Status)
		}
		c.checkProcessEffects(p, byKey)
	}
}

// checkProcessEffects checks one process's ledger against its state.
func (c *checker) checkProcessEffects(p *proc, byKey map[string]*intent) {
	// A step's effects: what it made in its target, not a refusal the
	// target keeps (a declined payment).
	effects := func(k stepKey) int {
		n := 0
		if in := byKey[k.process]; in != nil {
			for _, e := range in.effects {
				if !e.Refusal() {
					n++
				}
			}
		}
		return n
	}
	made := map[string]int{}   // step → its effects
	undone := map[string]int{} // step → its compensation's effects
	hasComp := map[string]bool{}
	for _, k := range p.steps {
		n := effects(k)
		if n > 1 {
			c.breach(InvProcessEffects, k.process, "%d effects of one %s", n, map[bool]string{false: "step", true: "compensation"}[k.comp])
		}
		if k.comp {
			undone[k.step], hasComp[k.step] = n, true
		} else {
			made[k.step] = n
		}
	}
	for _, s := range checkoutSteps {
		if undone[s.name] > 0 && made[s.name] == 0 {
			c.breach(InvProcessEffects, p.key, "step %s compensated (%s) without an effect of its own", s.name, s.compOp)
		}
	}
	if p.row == nil {
		return
	}
	failedAt := -1
	for i, s := range checkoutSteps {
		if s.name == p.row.FailedStep {
			failedAt = i
		}
	}
	switch p.row.Status {
	case "succeeded":
		for _, s := range checkoutSteps {
			if made[s.name] != 1 || undone[s.name] != 0 {
				c.breach(InvProcessEffects, p.key, "succeeded, but step %s made %d effects and its compensation %d", s.name, made[s.name], undone[s.name])
			}
		}
	case "compensated":
		if failedAt < 0 {
			c.breach(InvProcessEffects, p.key, "compensated without a failed step (%q)", p.row.FailedStep)
			return
		}
		for i, s := range checkoutSteps {
			switch {
			case i >= failedAt && made[s.name] != 0:
				c.breach(InvProcessEffects, p.key, "compensated after step %s failed (%s), but step %s made its effect and stands",
					p.row.FailedStep, p.row.ErrorCode, s.name)
			case i < failedAt && hasComp[s.name] && made[s.name] != undone[s.name]:
				// A charge not refunded, an invoice not cancelled: the
				// process does not net to zero.
				c.breach(InvProcessEffects, p.key, "compensated, but step %s made %d effects and its compensation %d", s.name, made[s.name], undone[s.name])
			}
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
