package yookassa

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// FuzzAnswer feeds arbitrary status codes and bodies to the answer parser:
// never a panic; a success only for a well-formed object; every error is a
// classified *adapters.Error that never echoes the body.
func FuzzAnswer(f *testing.F) {
	f.Add(200, []byte(`{"id":"22d6d597-000f-5000-9000-145f6df21d6f","status":"succeeded","paid":true,"amount":{"value":"100.00","currency":"RUB"}}`))
	f.Add(200, []byte(`{"id":"x","status":"canceled","amount":{"value":"1","currency":"RUB"},"cancellation_details":{"party":"payment_network","reason":"insufficient_funds"}}`))
	f.Add(400, []byte(`{"type":"error","id":"ab5a11cd","code":"invalid_request","description":"Idempotence key duplicated","parameter":"Idempotence-Key"}`))
	f.Add(429, []byte(`{"type":"error","code":"too_many_requests","retry_after":"1800"}`))
	f.Add(202, []byte(`{"type":"processing","retry_after":1e99}`))
	f.Add(200, []byte(`{"type":"list","items":[{"id":1}]}`))
	f.Add(500, []byte("\x00\xff"))
	f.Add(200, []byte(`{"id":"a b","status":"succeeded","amount":{"value":"-1.00","currency":"rub"}}`))
	a := &Adapter{cfg: Config{}.WithDefaults()}
	op := operation.Operation{Type: OpCharge}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		resp := &adapters.HTTPResponse{StatusCode: status, Header: http.Header{}, Body: body}
		out, err := a.createOutcome(resp, op)
		if err == nil {
			o, perr := parseObject(body)
			require.NoError(t, perr)
			require.Equal(t, o.ID, out.ObjectID)
			require.NotEqual(t, StatusCanceled, out.BusinessStatus)
			require.True(t, status >= 200 && status < 300)
			return
		}
		ae := adapters.AsError(err)
		require.True(t, ae.Class.Valid())
		require.NotEmpty(t, ae.Code)
		if len(body) > 8 {
			require.NotContains(t, err.Error(), string(body))
		}
		_, _, _ = parseList(body)
	})
}

func TestMinor(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"100.00", 10000, true}, {"5", 500, true}, {"0.5", 50, true}, {"1250.07", 125007, true},
		{"", 0, false}, {"-1.00", 0, false}, {"1.", 0, false}, {".5", 0, false}, {"1.234", 0, false},
		{"+1", 0, false}, {"1e3", 0, false}, {"99999999999999999999", 0, false},
	} {
		got, err := parseMinor(c.in)
		require.Equal(t, c.ok, err == nil, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	require.Equal(t, "1250.00", adapters.FormatMinor(125000))
	require.Equal(t, "0.07", adapters.FormatMinor(7))
}
