package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/journal"
)

// Approvals: the queue of intents waiting for a person's approval, each
// request's page (what exactly is approved: the significant fields, masked;
// never free text or secrets), a decision form (approve or deny, with a
// reason), a confirmation page, and the decision, recorded under the
// person's name through approval.Service (which checks the type's approver
// groups, the requester, and the fingerprint the person was shown).

// field is one significant field an approver is shown.
type field struct{ Name, Value string }

// approvalView is one request as a page shows it.
type approvalView struct {
	A      journal.Approval
	Fields []field
	Vote   string
	Reason string
	// Final: the record is decided; the page only reports it.
	Final bool
}

// fieldOrder puts what a person checks first.
var fieldOrder = map[string]int{"operation": 0, "target_system": 1, "amount_minor": 2, "currency": 3,
	"recipient_id": 4, "account_id": 5, "payment_id": 6, "order_id": 7}

// fields lists an approval's display (a JSON object of masked significant
// fields) in a fixed order.
func fields(display json.RawMessage) []field {
	var m map[string]any
	if json.Unmarshal(display, &m) != nil {
		return nil
	}
	out := make([]field, 0, len(m))
	for k, v := range m {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case float64:
			s = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			b, _ := json.Marshal(x)
			s = string(b)
		}
		out = append(out, field{Name: k, Value: s})
	}
	sort.Slice(out, func(i, j int) bool {
		oi, iok := fieldOrder[out[i].Name]
		oj, jok := fieldOrder[out[j].Name]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (c *Console) approvalsOff(w http.ResponseWriter, r *http.Request) bool {
	if c.d.Approvals == nil {
		c.fail(w, r, http.StatusNotFound, "approvals are off here (approvals.enabled)")
		return true
	}
	return false
}

// approvals lists the pending requests, the nearest wait limit first.
func (c *Console) approvals(w http.ResponseWriter, r *http.Request, _ session) {
	if c.approvalsOff(w, r) {
		return
	}
	pend, err := c.d.Approvals.Store.PendingApprovals(r.Context(), 200)
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	rows := make([]approvalView, len(pend))
	for i, a := range pend {
		rows[i] = approvalView{A: a, Fields: fields(a.Display)}
	}
	flash := ""
	if d := r.URL.Query().Get("decided"); d != "" {
		flash = "Recorded: " + d + ". The daemon carries the decision out at its next approvals sweep."
	}
	c.render(w, r, http.StatusOK, "approvals.html", view{Title: "Approvals", Nav: "approvals", Flash: flash, Data: rows})
}

// loadApproval reads the record named by the form's key.
func (c *Console) loadApproval(w http.ResponseWriter, r *http.Request) (approvalView, bool) {
	key := r.FormValue("key")
	a, err := c.d.Approvals.Store.Approval(r.Context(), key)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		c.fail(w, r, http.StatusNotFound, "no approval was requested for "+strconv.Quote(key))
		return approvalView{}, false
	case err != nil:
		c.failJournal(w, r, err)
		return approvalView{}, false
	}
	v := approvalView{A: a, Fields: fields(a.Display), Vote: r.FormValue("vote"), Reason: strings.TrimSpace(r.FormValue("reason")),
		Final: a.State != journal.ApprovalPending}
	return v, true
}

// approvalPage shows one request: the link in a pending answer leads here.
func (c *Console) approvalPage(w http.ResponseWriter, r *http.Request, _ session) {
	if c.approvalsOff(w, r) {
		return
	}
	v, ok := c.loadApproval(w, r)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "approval.html", view{Title: "Approval " + v.A.Key, Nav: "approvals", Data: v})
}

// checkForm refuses a decision form that is incomplete or stale.
func (c *Console) checkForm(v approvalView, r *http.Request) string {
	switch {
	case v.Final:
		return "this request is " + string(v.A.State) + " already; nothing to decide"
	case v.Vote != string(journal.VoteApprove) && v.Vote != string(journal.VoteDeny):
		return "choose approve or deny"
	case v.Reason == "":
		return "a decision needs a reason"
	case len(v.Reason) > 1000:
		return "a reason is at most 1000 bytes"
	case r.FormValue("fingerprint") != v.A.RequestHash:
		return "the request changed since the page was shown: look at it again"
	}
	return ""
}

// postedApproval is the request a confirm or decide form names, with the
// form checked against what the page showed; false when it has answered.
func (c *Console) postedApproval(w http.ResponseWriter, r *http.Request) (approvalView, bool) {
	if c.approvalsOff(w, r) {
		return approvalView{}, false
	}
	v, ok := c.loadApproval(w, r)
	if !ok {
		return v, false
	}
	if msg := c.checkForm(v, r); msg != "" {
		c.render(w, r, http.StatusBadRequest, "approval.html", view{Title: "Approval " + v.A.Key, Nav: "approvals", Error: msg, Data: v})
		return v, false
	}
	return v, true
}

// approvalConfirm shows the decision with exactly what it covers, for a
// second look; nothing is recorded yet.
func (c *Console) approvalConfirm(w http.ResponseWriter, r *http.Request, _ session) {
	v, ok := c.postedApproval(w, r)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "approval_confirm.html", view{Title: "Confirm", Nav: "approvals", Data: v})
}

// approvalDecide records the confirmed decision under the person's name.
func (c *Console) approvalDecide(w http.ResponseWriter, r *http.Request, se session) {
	v, ok := c.postedApproval(w, r)
	if !ok {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, http.StatusBadRequest, "approval.html", view{Title: "Approval " + v.A.Key, Nav: "approvals",
			Error: "the decision was not confirmed", Data: v})
		return
	}
	a, err := c.d.Approvals.DecideShown(r.Context(), se.Name, v.A.Key, v.A.RequestHash, journal.Vote(v.Vote), v.Reason)
	switch {
	case errors.Is(err, journal.ErrApprovalRefused), errors.Is(err, approval.ErrNotApprover):
		v.A, v.Final = a, a.State != journal.ApprovalPending
		c.render(w, r, http.StatusConflict, "approval.html", view{Title: "Approval " + v.A.Key, Nav: "approvals", Error: err.Error(), Data: v})
		return
	case errors.Is(err, journal.ErrInvalid):
		c.render(w, r, http.StatusBadRequest, "approval.html", view{Title: "Approval " + v.A.Key, Nav: "approvals", Error: err.Error(), Data: v})
		return
	case err != nil:
		c.failJournal(w, r, err)
		return
	}
	c.d.Log.Info("console: approval decided", "operation_key", a.Key, "vote", v.Vote, "approver", se.Name, "state", string(a.State))
	if c.d.Decided != nil {
		c.d.Decided()
	}
	http.Redirect(w, r, "/ui/approvals?decided="+url.QueryEscape(a.Key+" "+v.Vote+"d by "+se.Name+" ("+string(a.State)+")"), http.StatusSeeOther)
}
