package operation

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/redact"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	valid := []struct {
		in   string
		want Key
	}{
		{"prod:payment.charge:approval-6f3c2a:v1", Key{"prod", "payment.charge", "approval-6f3c2a", "v1"}},
		{"prod:invoice.create:order-48291:v1", Key{"prod", "invoice.create", "order-48291", "v1"}},
		{"prod:crm.callback:create:event-90173:v1", Key{"prod", "crm.callback", "create:event-90173", "v1"}},
		{"test:invoice.create:order-demo-1:v1", Key{"test", "invoice.create", "order-demo-1", "v1"}},
		{"stage-2:x:a.b_c~d:v10", Key{"stage-2", "x", "a.b_c~d", "v10"}},
		{"prod:payment.charge:550e8400-e29b-41d4-a716-446655440000:v1", Key{"prod", "payment.charge", "550e8400-e29b-41d4-a716-446655440000", "v1"}},
		{"prod:payment.charge:550e8400e29b41d4a716446655440000:v1", Key{"prod", "payment.charge", "550e8400e29b41d4a716446655440000", "v1"}},
		{"prod:payment.charge:evt_1NG8Du2eZvKYlo2CUI79vXWy:v1", Key{"prod", "payment.charge", "evt_1NG8Du2eZvKYlo2CUI79vXWy", "v1"}},
		{"prod:payment.charge:2026-12-02-000123:v0", Key{"prod", "payment.charge", "2026-12-02-000123", "v0"}},
		{"prod:payment.charge:4111111111111112:v1", Key{"prod", "payment.charge", "4111111111111112", "v1"}},  // fails Luhn
		{"prod:payment.charge:411111111111:v1", Key{"prod", "payment.charge", "411111111111", "v1"}},          // 12 digits
		{"p:a:" + strings.Repeat("ab-", 82) + "ab:v1", Key{"p", "a", strings.Repeat("ab-", 82) + "ab", "v1"}}, // 255 bytes
	}
	for _, tt := range valid {
		k, err := ParseKey(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, k)
		require.Equal(t, tt.in, k.String())
		require.NoError(t, ValidateKey(tt.in))
		// Every version of the key begins with its VersionPrefix, and only
		// the version's digits follow it.
		p := k.VersionPrefix()
		require.Equal(t, tt.in[:strings.LastIndexByte(tt.in, ':')+2], p)
		again, err := ParseKey(p + "7")
		require.NoError(t, err)
		require.Equal(t, Key{k.Env, k.Operation, k.IntentID, "v7"}, again)
	}

	invalid := []struct {
		in, part string
	}{
		{"", ""},
		{"prod:payment.charge:v1", ""},
		{"prod:payment.charge", ""},
		{"prod::order-1:v1", "operation"},
		{":payment.charge:order-1:v1", "env"},
		{"Prod:payment.charge:order-1:v1", "env"},
		{"prod:Payment.Charge:order-1:v1", "operation"},
		{"prod:payment..charge:order-1:v1", "operation"},
		{"prod:payment.charge.:order-1:v1", "operation"},
		{"prod:payment.charge:order-1:1", "key_version"},
		{"prod:payment.charge:order-1:V1", "key_version"},
		{"prod:payment.charge:order-1:v01", "key_version"},
		{"prod:payment.charge:order-1:v", "key_version"},
		{"prod:payment.charge:order-1:", "key_version"},
		{"prod:payment.charge::v1", "intent_id"},
		{"prod:payment.charge:a::b:v1", "intent_id"},
		{"prod:payment.charge:order 1:v1", ""},
		{"prod:payment.charge:order/1:v1", ""},
		{"prod:payment.charge:заказ-1:v1", ""},
		{"prod:payment.charge:order-1:v1\n", ""},
		{"p:a:" + strings.Repeat("ab-", 82) + "abc:v1", ""}, // 256 bytes
		{strings.Repeat("a", 33) + ":payment.charge:order-1:v1", "env"},
		{"prod:" + strings.Repeat("ab.", 22) + "a:order-1:v1", "operation"},
		// Card-like numbers.
		{"prod:payment.charge:4111111111111111:v1", ""},
		{"prod:payment.charge:order-4111111111111111-x:v1", ""},
		{"prod:payment.charge:4111-1111-1111-1111:v1", ""},
		{"prod:payment.charge:4111.1111.1111.1111:v1", ""},
		{"prod:payment.charge:4111_1111_1111_1111:v1", ""},
		{"prod:payment.charge:2026-12-02-4111-1111-1111-1111:v1", ""},
		{"prod:payment.charge:4111-1111-1111-1111-2026:v1", ""},
		{"prod:payment.charge:3782-822463-10005:v1", ""}, // Amex layout
		{"prod:payment.charge:378282246310005:v1", ""},
		{"prod:payment.charge:6011111111111117:v1", ""},
		{"prod:payment.charge:5555555555554444:v1", ""},
		{"prod:payment.charge:4222222222222:v1", ""}, // 13 digits
		// Secret-looking content.
		{"prod:payment.charge:sk_live_4eC39HqLyjWDarjtT1zdp7dc:v1", ""},
		{"prod:payment.charge:order-sk_test_x:v1", ""},
		{"prod:payment.charge:rk_live_abc:v1", ""},
		{"prod:payment.charge:whsec_abc:v1", ""},
		{"prod:payment.charge:aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z:v1", ""},       // base62, 34
		{"prod:payment.charge:da39a3ee5e6b4b0d3255bfef95601890afd80709:v1", ""}, // sha1 hex, 40
		{"prod:payment.charge:" + strings.Repeat("a1", 24) + ":v1", ""},
		{"prod:payment.charge:eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.x:v1", ""},
	}
	for _, tt := range invalid {
		_, err := ParseKey(tt.in)
		require.Error(t, err, "%q", tt.in)
		require.ErrorIs(t, err, ErrBadKey, tt.in)
		var ke *KeyError
		require.True(t, errors.As(err, &ke))
		require.Equal(t, tt.part, ke.Part, "%q: %v", tt.in, err)
		require.ErrorIs(t, ValidateKey(tt.in), ErrBadKey)
		if len(tt.in) > 8 {
			require.NotContains(t, err.Error(), tt.in[5:], "the error must not quote the key")
		}
	}
}

// TestKeyScreeningInnocentIDs: ids made of English words that name secrets,
// UUIDs, dates and long order numbers that fail Luhn are ordinary intents;
// only what looks like a secret is refused.
func TestKeyScreeningInnocentIDs(t *testing.T) {
	t.Parallel()
	innocent := []string{
		"order-token-77", "secret-santa-2026", "password-reset-42", "bearer-bond-2026", "Bearer-abc",
		"access-token-1", "my-PASSWORD-1", "api-key-rotation-7", "private_key-rotation", "token_abc",
		"task_live_stream-1", "disk_test_7", "whsec",
		"550e8400-e29b-41d4-a716-446655440000", "550e8400e29b41d4a716446655440000",
		"550E8400-E29B-41D4-A716-446655440000", "01890a5d-ac96-774b-bcce-b302099a8057",
		"12345678-1234-1234-1234-123456789012", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "evt_1NG8Du2eZvKYlo2CUI79vXWy",
		"2026-12-02", "2026-12-02T10:00:00Z", "2026-12-02-000125", "20261202-000125", "2026.12.02.1234567",
		"4111111111111112", "order-1234567812345678", "2026120200012345", "202612020001234567",
		"40702810900000012345",
		// A random UUID whose digit groups 2279-3963-4203-89 pass for a card
		// (the Python client's new_intent_id made one in a CI run).
		"py-approval-545b2279-3963-4203-89cf-a69e12954e9b", "545b2279-3963-4203-89cf-a69e12954e9b",
	}
	for _, intent := range innocent {
		key := "prod:payment.charge:" + intent + ":v1"
		_, err := ParseKey(key)
		require.NoError(t, err, key)
		require.NoError(t, ValidateID("event_id", intent), intent)
		require.NoError(t, ValidateID("approval_id", intent), intent)
		_, err = DeriveKey("prod", Command{EventID: intent, Operation: "payment.charge"}, nil)
		require.NoError(t, err, intent)
	}
	// "2026-12-02-000125" passes Luhn as a number: only its layout (a
	// date, not a card) keeps it innocent.
	require.Equal(t, redact.KindCard, redact.Detect("20261202000125"))

	secrets := []struct {
		intent string
		kind   redact.Kind
	}{
		{"4111111111111111", redact.KindCard},
		{"order-4111-1111-1111-1111", redact.KindCard},
		{"3782.822463.10005", redact.KindCard},
		{"sk_live_4eC39HqLyjWDarjtT1zdp7dc", redact.KindToken},
		{"SK_TEST_abc", redact.KindToken},
		{"ref-whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", redact.KindToken},
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", redact.KindJWT},
		{"aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z", redact.KindRandom},
		{"da39a3ee5e6b4b0d3255bfef95601890afd80709", redact.KindRandom},
	}
	for _, tt := range secrets {
		key := "prod:payment.charge:" + tt.intent + ":v1"
		_, err := ParseKey(key)
		var ke *KeyError
		require.ErrorAs(t, err, &ke, key)
		require.Equal(t, "contains a "+tt.kind.String(), ke.Reason, key)
		require.NotContains(t, err.Error(), tt.intent, "the error must not quote the secret")
		require.ErrorIs(t, ValidateID("event_id", tt.intent), ErrBadKey, tt.intent)
	}
}

func TestValidateParts(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"prod", "test", "dev", "stage-2", "eu1", strings.Repeat("a", 32)} {
		require.NoError(t, ValidateEnv(env), env)
	}
	for _, env := range []string{"", "Prod", "-prod", "pr_od", "pr:od", "прод", strings.Repeat("a", 33)} {
		require.ErrorIs(t, ValidateEnv(env), ErrBadKey, env)
	}
	for _, v := range []string{"v0", "v1", "v2", "v10", "v123456789"} {
		require.NoError(t, ValidateVersion(v), v)
	}
	for _, v := range []string{"", "v", "1", "V1", "v01", "v1.0", "v1234567890", "v-1"} {
		require.ErrorIs(t, ValidateVersion(v), ErrBadKey, v)
	}
	for _, n := range []string{"payment.charge", "crm.task.create", "x", "1c.invoice", "a_b.c_d"} {
		require.NoError(t, ValidateOperationName(n), n)
	}
	for _, n := range []string{"", ".a", "a.", "a..b", "_a", "a._b", "A.b", "a-b", "a:b", "a b", strings.Repeat("a", 65)} {
		require.ErrorIs(t, ValidateOperationName(n), ErrBadKey, n)
	}
	require.NoError(t, ValidateID("event_id", "evt-90173"))
	require.NoError(t, ValidateID("event_id", "evt_1NG8Du2eZvKYlo2CUI79vXWy"))
	require.NoError(t, ValidateID("event_id", "token-1"))
	for _, id := range []string{"", "evt 1", strings.Repeat("a", 256), "4111111111111111", "sk_live_1"} {
		err := ValidateID("event_id", id)
		require.ErrorIs(t, err, ErrBadKey, id)
		var ke *KeyError
		require.True(t, errors.As(err, &ke))
		require.Equal(t, "event_id", ke.Part)
	}
}

func TestDeriveKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  Command
		want string
		code DecodeCode
	}{
		{name: "intent given", cmd: Command{EventID: "evt-90173", Operation: "payment.charge", IntentID: "approval-6f3c2a", KeyVersion: "v1"}, want: "prod:payment.charge:approval-6f3c2a:v1"},
		{name: "intent defaults to event_id", cmd: Command{EventID: "evt-90173", Operation: "invoice.create"}, want: "prod:invoice.create:evt-90173:v1"},
		{name: "version given", cmd: Command{EventID: "e", Operation: "invoice.create", KeyVersion: "v2"}, want: "prod:invoice.create:e:v2"},
		{name: "operation_key used", cmd: Command{EventID: "e", Operation: "crm.task.create", OperationKey: "prod:crm.task.create:callback:e-1:v1"}, want: "prod:crm.task.create:callback:e-1:v1"},
		{name: "operation_key agreeing with intent and version", cmd: Command{EventID: "e", Operation: "crm.task.create", IntentID: "i", KeyVersion: "v3", OperationKey: "prod:crm.task.create:i:v3"}, want: "prod:crm.task.create:i:v3"},
		{name: "no operation", cmd: Command{EventID: "e"}, code: CodeMissingField},
		{name: "unregistered operation", cmd: Command{EventID: "e", Operation: "crm.callback"}, code: CodeUnknownOperation},
		{name: "no event_id nor intent", cmd: Command{Operation: "invoice.create"}, code: CodeMissingField},
		{name: "bad version", cmd: Command{EventID: "e", Operation: "invoice.create", KeyVersion: "2"}, code: CodeBadKey},
		{name: "bad intent", cmd: Command{EventID: "e", Operation: "invoice.create", IntentID: "a/b"}, code: CodeBadKey},
		{name: "intent with a card", cmd: Command{EventID: "e", Operation: "invoice.create", IntentID: "5555555555554444"}, code: CodeBadKey},
		{name: "bad operation_key", cmd: Command{EventID: "e", Operation: "invoice.create", OperationKey: "prod:invoice.create"}, code: CodeBadKey},
		{name: "operation_key env", cmd: Command{EventID: "e", Operation: "invoice.create", OperationKey: "test:invoice.create:e:v1"}, code: CodeKeyMismatch},
		{name: "operation_key operation", cmd: Command{EventID: "e", Operation: "invoice.create", OperationKey: "prod:crm.task.create:e:v1"}, code: CodeKeyMismatch},
		{name: "operation_key intent", cmd: Command{EventID: "e", Operation: "invoice.create", IntentID: "a", OperationKey: "prod:invoice.create:b:v1"}, code: CodeKeyMismatch},
		{name: "operation_key version", cmd: Command{EventID: "e", Operation: "invoice.create", KeyVersion: "v2", OperationKey: "prod:invoice.create:e:v1"}, code: CodeKeyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := DeriveKey("prod", tt.cmd, nil)
			if tt.code == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, k.String())
				parsed, err := ParseKey(k.String())
				require.NoError(t, err)
				require.Equal(t, k, parsed)
				return
			}
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tt.code, de.Code, "%v", err)
		})
	}
	_, err := DeriveKey("Prod", Command{EventID: "e", Operation: "invoice.create"}, nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// FuzzParseKey: a parsed key prints back to its input and parses again to
// the same Key; a refused key is refused with a *KeyError.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"prod:payment.charge:approval-6f3c2a:v1",
		"prod:crm.callback:create:event-90173:v1",
		"test:invoice.create:order-demo-1:v1",
		"prod:payment.charge:4111-1111-1111-1111:v1",
		"prod:payment.charge:a::b:v1",
		"prod:payment.charge:sk_live_x:v1",
		":::", "a:b:c:v1", "a:b:c:d:e:v99",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			var ke *KeyError
			if !errors.As(err, &ke) || !errors.Is(err, ErrBadKey) {
				t.Fatalf("ParseKey(%q): error %v is not a *KeyError", s, err)
			}
			if ValidateKey(s) == nil {
				t.Fatalf("ValidateKey(%q) accepts what ParseKey refuses", s)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey(%q).String() = %q", s, k.String())
		}
		again, err := ParseKey(k.String())
		if err != nil || again != k {
			t.Fatalf("re-parse of %q: %+v, %v", s, again, err)
		}
		if len(s) > MaxKeyLen || redact.Detect(s) != redact.KindNone {
			t.Fatalf("ParseKey(%q) accepted a key that breaks the rules", s)
		}
		if ValidateKey(s) != nil {
			t.Fatalf("ValidateKey(%q) refuses what ParseKey accepts", s)
		}
	})
}
