package operation

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStringFieldsScreened: every string field that is not free text —
// ids, titles, descriptions of the built-in types, a declared type's
// strings, an object's members — is refused when it holds a card number or
// a secret, by the rule that screens keys: the error names the field and
// what it holds, never the value. Free text is masked instead.
func TestStringFieldsScreened(t *testing.T) {
	t.Parallel()
	const card, spaced, key = "4111111111111111", "4111 1111 1111 1111", "sk_live_4eC39HqLyjWDarjtT1"
	charge := func(account, order string) string {
		return `{"event_id":"e1","operation":"payment.charge","approval_id":"ap-1","payload":{"account_id":"` + account +
			`","order_id":"` + order + `","amount_minor":100,"currency":"RUB"}}`
	}
	builtin := &Decoder{Env: "prod"}
	declared := shipmentDecoder(t)
	shipment := func(members string) string {
		return `{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{"order_id":"SO-1","quantity":3,` + members + `}}`
	}
	cases := []struct {
		name, body, field, kind string
		d                       *Decoder
	}{
		{"card in order_id", charge("acct-1", card), "payload.order_id", "card-like number", builtin},
		{"spaced card in account_id", charge(spaced, "o-1"), "payload.account_id", "card-like number", builtin},
		{"key in account_id", charge(key, "o-1"), "payload.account_id", "secret token", builtin},
		{"key inside order_id", charge("acct-1", "order-"+key), "payload.order_id", "secret token", builtin},
		{"card in a task title", `{"event_id":"e1","operation":"crm.task.create","payload":{"title":"card ` + spaced + `","responsible_id":"u1"}}`, "payload.title", "card-like number", builtin},
		{"key in an invoice description", `{"event_id":"e1","operation":"invoice.create","payload":{"order_id":"o","customer_id":"c","amount_minor":1,"currency":"RUB","description":"use ` + key + `"}}`, "payload.description", "secret token", builtin},
		{"card in a declared string", shipment(`"batch":"` + card + `"`), "payload.batch", "card-like number", declared},
		{"card in an object member", shipment(`"address":{"city":"x","zip":"` + card + `"}`), "payload.address.zip", "card-like number", declared},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.d.Decode([]byte(c.body))
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.ErrorIs(t, err, ErrInvalidField)
			require.Equal(t, c.field, de.Field)
			require.Contains(t, de.Msg, c.kind)
			for _, v := range []string{card, spaced, key, "4111 1111", "4eC39HqLyjWDarjtT1"} {
				require.NotContains(t, err.Error(), v)
				require.NotContains(t, de.Key, v)
			}
		})
	}
	// Ids that hold nothing secret pass, as keys do.
	_, err := builtin.Decode([]byte(charge("merchant-account-17", "order-48291")))
	require.NoError(t, err)
}

// TestFreeTextMasked: a free-text field is masked by MaskText — the card
// keeps its first six and last four digits, a key becomes [REDACTED] —
// before anything else sees it; the fingerprint does not change, and the
// length limit applies to the masked text.
func TestFreeTextMasked(t *testing.T) {
	t.Parallel()
	d := shipmentDecoder(t)
	body := func(comment string) []byte {
		return []byte(`{"event_id":"e1","operation":"shipment.create","intent_id":"i1","payload":{"order_id":"SO-1","quantity":3,"comment":"` + comment + `"}}`)
	}
	plain, err := d.Decode(body("call Ivan"))
	require.NoError(t, err)
	op, err := d.Decode(body(`paid by 4111 1111 1111 1111,\nkey sk_live_4eC39HqLyjWDarjtT1`))
	require.NoError(t, err)
	require.Equal(t, "paid by 4111 11** **** 1111,\nkey [REDACTED]", op.Extra["comment"])
	require.Equal(t, plain.Fingerprint, op.Fingerprint, "free text is outside the fingerprint")
	cmd, err := op.Command()
	require.NoError(t, err)
	require.NotContains(t, string(cmd.Payload), "4111 1111")
	require.NotContains(t, string(cmd.Payload), "sk_live_")
	again, err := d.DecodeCommand(cmd)
	require.NoError(t, err)
	require.Equal(t, op.Extra, again.Extra, "masking twice changes nothing")
	require.Equal(t, MaskText(MaskText("x 4111111111111111")), MaskText("x 4111111111111111"))

	// The limit (4000 by default for free text) is on what is kept.
	long := strings.Repeat("a", 3995) + " token=x"
	_, err = d.Decode(body(long))
	require.ErrorIs(t, err, ErrInvalidField, "the masked text is longer than 4000")
}
