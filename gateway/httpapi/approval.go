package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/redact"
)

const approvalSuffix = "/approval"

// approvalBody is the body of POST /v1/operations/{key}/approval.
type approvalBody struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// approvalAnswer is its answer: the record as it stands after the decision.
type approvalAnswer struct {
	OperationKey string          `json:"operation_key"`
	State        string          `json:"state"`
	Approvers    int             `json:"approvers"`
	Approved     int             `json:"approved"`
	Request      json.RawMessage `json:"request"`
	ExpiresAt    time.Time       `json:"expires_at"`
	Decisions    []approvalVote  `json:"decisions"`
}

type approvalVote struct {
	Approver    string    `json:"approver"`
	Decision    string    `json:"decision"`
	Reason      string    `json:"reason"`
	Fingerprint string    `json:"fingerprint"`
	At          time.Time `json:"at"`
}

// approval is POST /v1/operations/{key}/approval: one approver's decision.
// Only an approver's token decides; the agents' token is refused 403.
func (s *server) approval(w http.ResponseWriter, r *http.Request) {
	svc := s.cfg.Approvals
	if svc == nil {
		writeProblem(w, r, http.StatusNotFound, "not-found", "Not found", "Approvals are not enabled on this daemon (approvals.enabled).", nil)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeProblem(w, r, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", "POST a decision.", nil)
		return
	}
	token := bearerToken(r)
	who, ok := svc.ByToken(token)
	if !ok {
		if token != "" && (s.cfg.Token.IsZero() || gateway.Authorized(r, s.cfg.Token)) {
			writeProblem(w, r, http.StatusForbidden, "not-an-approver", "Forbidden",
				"An agent's token can never approve: a person decides, with an approver token (approvals.approvers).", nil)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="idemgate approvals"`)
		writeProblem(w, r, http.StatusUnauthorized, "unauthorized", "Unauthorized", "An approver token is required (Authorization: Bearer …).", nil)
		return
	}
	key := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, Prefix), approvalSuffix)
	var body approvalBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeProblem(w, r, http.StatusBadRequest, "bad-approval", "Bad decision", `The body is {"decision":"approve|deny","reason":"…"}.`, nil)
		return
	}
	vote := journal.Vote(body.Decision)
	if vote != journal.VoteApprove && vote != journal.VoteDeny {
		writeProblem(w, r, http.StatusBadRequest, "bad-approval", "Bad decision", `decision must be "approve" or "deny".`, nil)
		return
	}
	if strings.TrimSpace(body.Reason) == "" {
		writeProblem(w, r, http.StatusBadRequest, "bad-approval", "Bad decision", "A decision needs a reason.", nil)
		return
	}
	a, err := svc.Decide(r.Context(), who.Name, key, vote, body.Reason)
	switch {
	case errors.Is(err, journal.ErrSelfApproval), errors.Is(err, approval.ErrNotApprover):
		writeProblem(w, r, http.StatusForbidden, "not-an-approver", "Forbidden", redact.String(err.Error()), nil)
		return
	case errors.Is(err, journal.ErrNotFound):
		writeProblem(w, r, http.StatusNotFound, "not-found", "Not found", redact.String(err.Error()), nil)
		return
	case errors.Is(err, journal.ErrApprovalRefused):
		writeProblem(w, r, http.StatusConflict, "approval-refused", "Decision refused", redact.String(err.Error()), nil)
		return
	case errors.Is(err, journal.ErrInvalid):
		writeProblem(w, r, http.StatusBadRequest, "bad-approval", "Bad decision", redact.String(err.Error()), nil)
		return
	case err != nil:
		writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "Journal unavailable", "The decision could not be recorded; send it again.", nil)
		return
	}
	out := approvalAnswer{OperationKey: a.Key, State: string(a.State), Approvers: a.Approvers, Approved: a.Approved(),
		Request: a.Display, ExpiresAt: a.ExpiresAt.UTC(), Decisions: []approvalVote{}}
	for _, v := range a.Votes {
		out.Decisions = append(out.Decisions, approvalVote{Approver: v.Approver, Decision: string(v.Vote), Reason: v.Reason,
			Fingerprint: v.RequestHash, At: v.At.UTC()})
	}
	writeJSON(w, http.StatusOK, "application/json", out)
}

// bearerToken is the request's bearer token, "" when none.
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
