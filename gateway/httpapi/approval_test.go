package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/gateway/httpapi"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
)

// TestApprovalEndpointSeparatesDuties: the agents' token is refused 403 and
// nothing is recorded; an approver's token records the decision, bound to
// the fingerprint, and a second approval is refused 409.
func TestApprovalEndpointSeparatesDuties(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	policy, err := operation.CompileApprovalPolicy(nil, nil)
	require.NoError(t, err)
	const key = "test:payment.charge:evt-http-approval:v1"
	_, _, err = st.RequestApproval(ctx, journal.ApprovalRequest{Key: key, OperationType: "payment.charge", RequestHash: strings.Repeat("a", 64),
		TargetSystem: "payments", RequestedBy: "agent:http_api", Approvers: 1, TTL: time.Hour,
		Display: json.RawMessage(`{"operation":"payment.charge","amount_minor":125000,"currency":"RUB"}`)})
	require.NoError(t, err)
	svc := &approval.Service{Store: st, Policy: policy, Approvers: []approval.Approver{{Name: "alice", Token: "approver-token-alice-0001"}}}
	h := httpapi.Handler(nil, httpapi.Config{Token: "agent-token-0000000001", Approvals: svc})
	post := func(token, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, httpapi.Prefix+key+"/approval", strings.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := post("agent-token-0000000001", `{"decision":"approve","reason":"I am sure"}`)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "can never approve")
	require.Equal(t, http.StatusUnauthorized, post("", `{"decision":"approve","reason":"x"}`).Code)
	a, err := st.Approval(ctx, key)
	require.NoError(t, err)
	require.Equal(t, journal.ApprovalPending, a.State, "the agent's attempt recorded nothing")
	require.Empty(t, a.Votes)

	require.Equal(t, http.StatusBadRequest, post("approver-token-alice-0001", `{"decision":"maybe","reason":"x"}`).Code)
	w = post("approver-token-alice-0001", `{"decision":"approve","reason":"order confirmed"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var got struct {
		State     string `json:"state"`
		Decisions []struct {
			Approver    string `json:"approver"`
			Fingerprint string `json:"fingerprint"`
		} `json:"decisions"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Equal(t, "approved", got.State)
	require.Equal(t, "alice", got.Decisions[0].Approver)
	require.Equal(t, strings.Repeat("a", 64), got.Decisions[0].Fingerprint)
	w = post("approver-token-alice-0001", `{"decision":"approve","reason":"again"}`)
	require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "already approved")
}
