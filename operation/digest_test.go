package operation_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/operation"
)

func decode(t *testing.T, intent, payload string) operation.Operation {
	t.Helper()
	d := &operation.Decoder{Env: "test"}
	op, err := d.DecodeCommand(operation.Command{EventID: intent, Operation: "crm.deal.create", Payload: json.RawMessage(payload)})
	require.NoError(t, err)
	return op
}

func TestConflictFields(t *testing.T) {
	first := decode(t, "deal-1", `{"title":"Renewal","customer_id":"c-7","amount_minor":125000,"currency":"rub"}`)
	digests := first.FieldDigests()
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(digests), &m))
	require.Len(t, m, 4, "one digest per field present")
	for name, d := range m {
		require.Len(t, d, operation.FieldDigestLen, name)
	}
	require.NotContains(t, digests, "125000")
	require.NotContains(t, digests, "Renewal")
	require.NotContains(t, digests, "c-7")

	same := decode(t, "deal-1", `{"currency":"RUB","amount_minor":125000,"customer_id":"c-7","title":"Renewal","attempt":3}`)
	require.Equal(t, digests, same.FieldDigests(), "normalised values, transport fields left out")
	require.Empty(t, operation.ConflictFields(digests, same.FieldDigests()))

	changed := decode(t, "deal-1", `{"title":"Renewal","customer_id":"c-7","amount_minor":500000,"currency":"EUR","stage":"won"}`)
	require.Equal(t, []string{"amount_minor", "currency", "stage"}, operation.ConflictFields(digests, changed.FieldDigests()),
		"changed values and a field only one request has")
	dropped := decode(t, "deal-1", `{"title":"Renewal","customer_id":"c-7","amount_minor":500000,"currency":"eur"}`)
	require.Equal(t, []string{"stage"}, operation.ConflictFields(changed.FieldDigests(), dropped.FieldDigests()))

	other := decode(t, "deal-2", `{"title":"Renewal","customer_id":"c-7","amount_minor":125000,"currency":"rub"}`)
	require.NotEqual(t, digests, other.FieldDigests(), "salted with the key: equal values under other keys do not match")

	require.Nil(t, operation.ConflictFields("", digests), "a row stored before digests existed names nothing")
	require.Nil(t, operation.ConflictFields("not json", digests))
	require.Empty(t, operation.Operation{}.FieldDigests())
	require.False(t, strings.Contains(first.FieldDigests(), " "))
}
