package yookassa

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// listEnvelope and parseListReference are the two-step parser parseList
// replaced (the envelope with raw items, then each item): the oracle of
// FuzzParseList.
type listEnvelope struct {
	Type       string            `json:"type"`
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
	NextPage   string            `json:"next_page,omitempty"`
}

func parseListReference(body []byte) ([]object, string, error) {
	var l listEnvelope
	if err := json.Unmarshal(body, &l); err != nil || l.Type != "list" {
		return nil, "", fmt.Errorf("%w: not a list", errMalformed)
	}
	out := make([]object, 0, len(l.Items))
	for _, raw := range l.Items {
		o, err := parseObject(raw)
		if err != nil {
			return nil, "", err
		}
		out = append(out, o)
	}
	next := l.NextCursor
	if next == "" {
		next = l.NextPage
	}
	return out, next, nil
}

// topLevelRepeats reports whether a JSON object names a field twice (case
// folded), which parseList refuses and the reference let the last one win.
func topLevelRepeats(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		name := listField(t.(string))
		if seen[name] {
			return true
		}
		seen[name] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}

func listPageBody(n int, next string) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"list","items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"2f1c%08d-000f-5000-9000-1b8e5a3c7d21","status":"succeeded","paid":true,"amount":{"value":"%d.00","currency":"RUB"},"income_amount":{"value":"96.50","currency":"RUB"},"description":"order %d","recipient":{"account_id":"100500","gateway_id":"100700"},"payment_method":{"type":"bank_card","id":"2f1c-pm","saved":false,"card":{"first6":"555555","last4":"4444","expiry_month":"07","expiry_year":"2030","card_type":"MasterCard"}},"captured_at":"2026-12-03T10:00:01.000Z","created_at":"2026-12-03T10:00:00.000Z","test":true,"refunded_amount":{"value":"0.00","currency":"RUB"},"refundable":true,"metadata":{"idemgate_key":"bench:payment.charge:order-%d:v1","idemgate_order_id":"order-%d"}}`, i, 100+i, i, i, i)
	}
	fmt.Fprintf(&b, `],"next_cursor":%q}`, next)
	return []byte(b.String())
}

// TestParseList: items, both cursor names, null and empty items, and the
// refusals: not a list, a bad item, trailing data, a field named twice
// (which the two-step parser let merge items of both copies).
func TestParseList(t *testing.T) {
	items, next, err := parseList(listPageBody(3, "c-2"))
	require.NoError(t, err)
	require.Len(t, items, 3)
	require.Equal(t, "c-2", next)
	require.Equal(t, "bench:payment.charge:order-1:v1", items[1].Metadata[MetaKey])
	require.Equal(t, "101.00", items[1].Amount.Value)

	for body, want := range map[string]string{
		`{"type":"list","items":[],"next_page":"p"}`:        "p",
		`{"type":"list","items":null}`:                      "",
		`{"TYPE":"list","next_cursor":"a","next_page":"b"}`: "a",
	} {
		items, next, err := parseList([]byte(body))
		require.NoError(t, err, body)
		require.Empty(t, items, body)
		require.Equal(t, want, next, body)
	}

	for _, body := range []string{
		``, `[]`, `null`, `{"type":"error"}`, `{"items":[]}`,
		`{"type":"list","items":{}}`, `{"type":"list","items":[]} {}`,
		`{"type":"list","items":[1]}`, `{"type":"list","items":[{"id":"a"}]}`,
		`{"type":"list","items":[null]}`, `{"type":"list","items":[],}`,
		`{"type":"list","items":[{"id":"p1","status":"succeeded","amount":{"value":"1.00","currency":"RUB"},"metadata":{"idemgate_key":"k"}}],` +
			`"Items":[{"id":"p2","status":"succeeded","amount":{"value":"1.00","currency":"RUB"}}]}`,
		`{"type":"list","type":"list","items":[]}`,
		`{"type":"list","items":[],"next_cursor":"a","next_curſor":"b"}`,
	} {
		_, _, err := parseList([]byte(body))
		require.ErrorIs(t, err, errMalformed, "%q", body)
	}
}

// FuzzParseList: parseList agrees with the two-step parser it replaced on
// every body, but one that names an envelope field twice, which it alone
// refuses.
func FuzzParseList(f *testing.F) {
	f.Add(listPageBody(2, "c"))
	f.Add([]byte(`{"type":"list","items":null,"next_page":"x"}`))
	f.Add([]byte(`{"type":"list","items":[{"id":"a","status":"pending","amount":{"value":"1","currency":"RUB"},"metadata":{"k":"v"}}],"items":[{"id":"b","status":"pending","amount":{"value":"1","currency":"RUB"}}]}`))
	f.Add([]byte(`{"type":"list","items":[{"id":"a"}]}`))
	f.Add([]byte(`{"type":"list","items":[]} x`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotNext, err := parseList(body)
		want, wantNext, werr := parseListReference(body)
		if err != nil {
			require.ErrorIs(t, err, errMalformed)
			if werr == nil {
				require.True(t, topLevelRepeats(body), "refused what the reference took: %q: %v", body, err)
			}
			return
		}
		require.NoError(t, werr, "took what the reference refused: %q", body)
		require.Equal(t, wantNext, gotNext)
		require.Equal(t, len(want), len(got))
		for i := range want {
			require.Equal(t, want[i], got[i])
		}
	})
}

// BenchmarkParseList: one 100-item page (the scan's page size) of
// realistic payments, the one-pass parser against the two-step one.
func BenchmarkParseList(b *testing.B) {
	body := listPageBody(100, "next")
	for _, c := range []struct {
		name  string
		parse func([]byte) ([]object, string, error)
	}{{"one-pass", parseList}, {"two-step", parseListReference}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
