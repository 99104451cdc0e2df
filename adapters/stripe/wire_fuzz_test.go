package stripe

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// FuzzAnswer: arbitrary statuses, headers and bodies never panic; a success
// needs a 200 with a well-formed PaymentIntent that is not a failure; every
// error is classified and never echoes the body.
func FuzzAnswer(f *testing.F) {
	f.Add(200, "", []byte(`{"id":"pi_1","object":"payment_intent","amount":2000,"currency":"eur","status":"succeeded","metadata":{}}`))
	f.Add(402, "", []byte(`{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","payment_intent":{"id":"pi_2","object":"payment_intent","amount":1,"currency":"eur","status":"requires_payment_method"}}}`))
	f.Add(409, "", []byte(`{"error":{"type":"idempotency_error","code":"idempotency_key_in_use"}}`))
	f.Add(503, "false", []byte(`{"error":{"type":"api_error"}}`))
	f.Add(200, "", []byte(`{"id":"pi_3","object":"payment_intent","amount":-1,"currency":"eur","status":"succeeded"}`))
	f.Add(200, "true", []byte(`{"error":null}`))
	a := &Adapter{cfg: Config{}.WithDefaults()}
	op := operation.Operation{Type: OpCharge}
	f.Fuzz(func(t *testing.T, status int, shouldRetry string, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		h := http.Header{}
		h.Set("Stripe-Should-Retry", shouldRetry)
		out, err := a.createOutcome(&adapters.HTTPResponse{StatusCode: status, Header: h, Body: body}, op)
		if err == nil {
			require.Equal(t, 200, status)
			o, perr := parseObject(body, "payment_intent")
			require.NoError(t, perr)
			require.Equal(t, o.ID, out.ObjectID)
			_, final := failedCode(o)
			require.False(t, final)
			return
		}
		ae := adapters.AsError(err)
		require.True(t, ae.Class.Valid())
		require.NotEmpty(t, ae.Code)
		if len(body) > 8 {
			require.NotContains(t, err.Error(), string(body))
		}
	})
}

func TestSearchQueryEscapes(t *testing.T) {
	require.Equal(t, `metadata['idemgate_key']:'a\'b\\c'`, searchQuery(`a'b\c`))
}
