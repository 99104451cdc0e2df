package ingest_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/redact"
)

// stubJS satisfies New's non-nil check for configuration tests, which never
// publish.
type stubJS struct{ jetstream.JetStream }

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := ingest.Config{Sources: []ingest.Source{
		{Name: "yookassa", Routes: []ingest.Route{{Event: "e", Operation: "o", Payload: []ingest.FieldMap{{Field: "amount_minor", Path: "a", Convert: ingest.ConvertMinorUnits}}}}},
		{Name: "tbank"}, {Name: "stripe"}, {Name: "crm", Scheme: ingest.SchemeStandard},
	}}.WithDefaults()
	require.Equal(t, ":8080", cfg.Addr)
	require.Equal(t, int64(256<<10), cfg.MaxBodyBytes)
	require.Equal(t, "IDEMGATE_COMMANDS", cfg.CommandsStream, "the daemon's default commands stream")
	require.Positive(t, cfg.ReadHeaderTimeout)
	require.Empty(t, cfg.TrustedProxies, "X-Forwarded-For is not trusted by default")
	yk := cfg.Sources[0]
	require.Equal(t, ingest.SchemeYooKassa, yk.Scheme)
	require.Equal(t, ingest.YooKassaAddresses, yk.AllowedAddresses)
	require.Equal(t, "event", yk.EventTypePath)
	require.Equal(t, ingest.DefaultYooKassaAPI, yk.Refetch.API)
	require.Equal(t, 2, yk.Routes[0].Payload[0].Scale)
	require.Equal(t, "Status", cfg.Sources[1].EventTypePath)
	require.Equal(t, "type", cfg.Sources[2].EventTypePath)
	require.Equal(t, ingest.DefaultTolerance, cfg.Sources[3].Tolerance)
	require.Empty(t, cfg.Sources[2].AllowedAddresses)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	route := func(op string, fields ...ingest.FieldMap) []ingest.Route {
		return []ingest.Route{{Event: "payment.succeeded", Operation: op, Payload: fields}}
	}
	task := []ingest.FieldMap{{Field: "title", Value: "t"}, {Field: "responsible_id", Value: "m"}}
	tests := []struct {
		name string
		src  ingest.Source
		want string
	}{
		{"unknown scheme", ingest.Source{Name: "x", Scheme: "paypal"}, "unknown scheme"},
		{"no scheme", ingest.Source{Name: "custom"}, "scheme is required"},
		{"bad name", ingest.Source{Name: "Stripe/1", Scheme: ingest.SchemeStripe, Secrets: []redact.Secret{"s"}}, "name must be"},
		{"no secrets", ingest.Source{Name: "stripe"}, "needs secrets"},
		{"tbank without terminal", ingest.Source{Name: "tbank", Secrets: []redact.Secret{"p"}}, "terminal_key"},
		{"yookassa with secrets", ingest.Source{Name: "yookassa", Secrets: []redact.Secret{"s"}}, "no signing secrets"},
		{"yookassa refetch without key", ingest.Source{Name: "yookassa", Refetch: ingest.YooKassaConfig{ShopID: "1"}}, "secret_key"},
		{"bad CIDR", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, AllowedAddresses: []string{"10.0.0.0/33"}}, "allowed_addresses"},
		{"route twice", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: append(route("crm.task.create", task...), route("crm.task.create", task...)...)}, "routed twice"},
		{"path and value", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: route("crm.task.create", ingest.FieldMap{Field: "title", Path: "a", Value: "b"})}, "exclusive"},
		{"bad convert", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: route("crm.task.create", ingest.FieldMap{Field: "title", Path: "a", Convert: "float"})}, "unknown convert"},
		{"object constant", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: route("crm.task.create", ingest.FieldMap{Field: "title", Value: map[string]any{}})}, "value must be"},
		{"empty path segment", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: route("crm.task.create", ingest.FieldMap{Field: "title", Path: "a..b"})}, "empty segment"},
		{"bad operation name", ingest.Source{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: route("Crm Task")}, "operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := ingest.Config{Sources: []ingest.Source{tt.src}}.WithDefaults()
			err := cfg.Validate()
			require.ErrorIs(t, err, ingest.ErrInvalidConfig)
			require.Contains(t, err.Error(), tt.want)
		})
	}
	require.ErrorContains(t, ingest.Config{}.WithDefaults().Validate(), "no sources")
	dup := ingest.Config{Sources: []ingest.Source{{Name: "stripe", Secrets: []redact.Secret{"s"}}, {Name: "stripe", Secrets: []redact.Secret{"s"}}}}
	require.ErrorContains(t, dup.WithDefaults().Validate(), "used twice")
}

func TestNewChecksRoutesAgainstRegistry(t *testing.T) {
	t.Parallel()
	src := func(r ingest.Route) ingest.Config {
		return ingest.Config{Sources: []ingest.Source{{Name: "stripe", Secrets: []redact.Secret{"s"}, Routes: []ingest.Route{r}}}}
	}
	tests := []struct {
		name string
		cfg  ingest.Config
		want string
	}{
		{"unregistered operation", src(ingest.Route{Event: "e", Operation: "crm.lead.create"}), "not registered"},
		{"money without approval", src(ingest.Route{Event: "e", Operation: "payment.refund", Payload: []ingest.FieldMap{
			{Field: "payment_id", Path: "a"}, {Field: "amount_minor", Path: "b"}, {Field: "currency", Path: "c"}}}), "needs an approval"},
		{"unknown field", src(ingest.Route{Event: "e", Operation: "crm.task.create", Payload: []ingest.FieldMap{
			{Field: "title", Value: "t"}, {Field: "responsible_id", Value: "r"}, {Field: "priority", Value: "high"}}}), "no field priority"},
		{"required field unmapped", src(ingest.Route{Event: "e", Operation: "crm.task.create", Payload: []ingest.FieldMap{
			{Field: "title", Value: "t"}}}), "needs field responsible_id"},
		{"required field optional", src(ingest.Route{Event: "e", Operation: "crm.task.create", Payload: []ingest.FieldMap{
			{Field: "title", Value: "t"}, {Field: "responsible_id", Path: "r", Optional: true}}}), "needs field responsible_id"},
		{"t-bank nested path", ingest.Config{Sources: []ingest.Source{{Name: "tbank", TerminalKey: "T", Secrets: []redact.Secret{"p"},
			Routes: []ingest.Route{{Event: "CONFIRMED", Operation: "crm.task.create", Payload: []ingest.FieldMap{
				{Field: "title", Value: "t"}, {Field: "responsible_id", Path: "Data.manager"}}}}}}}, "nested"},
		{"yookassa without refetch", ingest.Config{Sources: []ingest.Source{{Name: "yookassa"}}}, "refetch credentials"},
		{"bad standard secret", ingest.Config{Sources: []ingest.Source{{Name: "crm", Scheme: ingest.SchemeStandard, Secrets: []redact.Secret{"whsec_!!!"}}}}, "base64"},
		{"missing secrets file", ingest.Config{Sources: []ingest.Source{{Name: "stripe", SecretsFile: "/nonexistent/stripe"}}}, "secrets file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ingest.New(tt.cfg, stubJS{}, nil)
			require.ErrorIs(t, err, ingest.ErrInvalidConfig)
			require.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := ingest.New(src(ingest.Route{Event: "e", Operation: "crm.task.create", Payload: []ingest.FieldMap{
		{Field: "title", Value: "t"}, {Field: "responsible_id", Value: "r"}}}), nil, nil)
	require.ErrorIs(t, err, ingest.ErrInvalidConfig, "no JetStream")
	_, err = ingest.New(src(ingest.Route{}), stubJS{}, nil, ingest.WithRefetcher("nope", nil))
	require.ErrorIs(t, err, ingest.ErrInvalidConfig)
}

func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stripeFile := filepath.Join(dir, "stripe")
	require.NoError(t, os.WriteFile(stripeFile, []byte("\n"+stripeOld+"\n  "+stripeNew+"  \n\n"), 0o600))
	keyFile := filepath.Join(dir, "yookassa")
	require.NoError(t, os.WriteFile(keyFile, []byte(shopSecret+"\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n \n"), 0o600))

	b := setup(t, setupOpts{cfg: func(c *ingest.Config) {
		c.Sources[0].Secrets = nil
		c.Sources[0].SecretsFile = stripeFile
		c.Sources[3].Refetch.SecretKey = ""
		c.Sources[3].Refetch.SecretKeyFile = keyFile
	}})
	for i, secret := range []string{stripeOld, stripeNew} {
		body := stripeEvent("evt_file", "payment_intent.succeeded", "c")
		require.Equal(t, 200, b.post(t, "stripe", body, stripeHeader(secret, fixedNow, body), "").Code, "secret %d", i)
	}
	const payID = "5d6d597a-000f-5000-9000-145f6df21d6f"
	b.yk.put(payID, yookassaPayment(payID, "succeeded", "1.00"))
	rec := b.post(t, "yookassa", yookassaNotification("payment.succeeded", yookassaPayment(payID, "succeeded", "1.00")), nil, yookassaAddr)
	require.Equal(t, 200, rec.Code, "the key file's secret authenticates the re-fetch")

	cfg := testConfig("http://127.0.0.1:1/v3")
	cfg.Sources[0].Secrets, cfg.Sources[0].SecretsFile = nil, empty
	_, err := ingest.New(cfg, stubJS{}, nil)
	require.ErrorContains(t, err, "holds no secret")
}

func TestRefetchWithWrongCredentialsIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: func(c *ingest.Config) { c.Sources[3].Refetch.SecretKey = "wrong" }})
	const payID = "6d6d597a-000f-5000-9000-145f6df21d6f"
	b.yk.put(payID, yookassaPayment(payID, "succeeded", "1.00"))
	rec := b.post(t, "yookassa", yookassaNotification("payment.succeeded", yookassaPayment(payID, "succeeded", "1.00")), nil, yookassaAddr)
	require.Equal(t, 503, rec.Code)
	require.Equal(t, uint64(0), b.msgs(t))
}

func TestYooKassaRefetcher(t *testing.T) {
	t.Parallel()
	yk := newFakeYooKassa(t)
	const id = "7d6d597a-000f-5000-9000-145f6df21d6f"
	yk.put(id, yookassaPayment(id, "succeeded", "3.00"))
	r, err := ingest.NewYooKassaRefetcher(ingest.YooKassaConfig{API: yk.URL() + "/", ShopID: shopID, SecretKey: shopSecret}, nil)
	require.NoError(t, err)
	ctx := context.Background()
	obj, err := r.Refetch(ctx, ingest.ObjectRef{EventType: "payment.succeeded", ID: id})
	require.NoError(t, err)
	require.Contains(t, string(obj), `"succeeded"`)
	_, err = r.Refetch(ctx, ingest.ObjectRef{EventType: "payment.succeeded", ID: "unknown-id"})
	require.ErrorIs(t, err, ingest.ErrObjectNotFound)
	_, err = r.Refetch(ctx, ingest.ObjectRef{EventType: "payment.succeeded", ID: "../../admin"})
	require.ErrorIs(t, err, ingest.ErrObjectNotFound, "ids outside the provider's alphabet are never requested")
	_, err = r.Refetch(ctx, ingest.ObjectRef{EventType: "weird", ID: id})
	require.Error(t, err)
	bad, err := ingest.NewYooKassaRefetcher(ingest.YooKassaConfig{API: yk.URL(), ShopID: shopID, SecretKey: "nope"}, nil)
	require.NoError(t, err)
	_, err = bad.Refetch(ctx, ingest.ObjectRef{EventType: "payment.succeeded", ID: id})
	require.ErrorIs(t, err, ingest.ErrRefetchRejected)
	require.NotContains(t, err.Error(), "nope")
	_, err = ingest.NewYooKassaRefetcher(ingest.YooKassaConfig{API: "ftp://x", ShopID: "s", SecretKey: "k"}, nil)
	require.ErrorIs(t, err, ingest.ErrInvalidConfig)
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"peer, no proxies trusted", "203.0.113.1:1234", []string{"185.71.76.5"}, nil, "203.0.113.1"},
		{"peer not a trusted proxy", "203.0.113.1:1234", []string{"185.71.76.5"}, trusted, "203.0.113.1"},
		{"through a trusted proxy", "10.1.2.3:80", []string{"185.71.76.5"}, trusted, "185.71.76.5"},
		{"spoofed left entry ignored", "10.1.2.3:80", []string{"185.71.76.5, 198.51.100.7"}, trusted, "198.51.100.7"},
		{"two trusted hops", "10.1.2.3:80", []string{"198.51.100.7, 10.9.9.9"}, trusted, "198.51.100.7"},
		{"several headers", "10.1.2.3:80", []string{"185.71.76.5", "10.9.9.9"}, trusted, "185.71.76.5"},
		{"only trusted hops", "10.1.2.3:80", []string{"10.4.4.4"}, trusted, "10.4.4.4"},
		{"trusted proxy, no header", "10.1.2.3:80", nil, trusted, "10.1.2.3"},
		{"IPv6 peer", "[::1]:80", []string{"2a02:5180::1"}, trusted, "2a02:5180::1"},
		{"mapped IPv4", "[::ffff:203.0.113.1]:80", nil, nil, "203.0.113.1"},
		{"garbage hop", "10.1.2.3:80", []string{"unknown"}, trusted, ""},
		{"garbage peer", "nonsense", nil, trusted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("POST", "/webhooks/yookassa", nil)
			req.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			got, ok := ingest.ClientAddr(req, tt.trusted)
			if tt.want == "" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, tt.want, got.String())
		})
	}
}

func TestEventID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		source string
		parts  []string
		want   string
	}{
		{"stripe", "stripe", []string{"evt_1NG8Du2eZvKYlo2C"}, "stripe:evt_1NG8Du2eZvKYlo2C"},
		{"yookassa", "yookassa", []string{"payment.succeeded", "22d6d597-000f-5000-9000-145f6df21d6f"}, "yookassa:payment.succeeded:22d6d597-000f-5000-9000-145f6df21d6f"},
		{"tbank", "tbank", []string{"123456789", "CONFIRMED", "19200"}, "tbank:123456789:CONFIRMED:19200"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ingest.EventID(tt.source, tt.parts...), tt.name)
	}
	// Ids that would break the key rules are hashed, stably.
	for _, parts := range [][]string{
		{"evt with spaces"},
		{"4111111111111111"}, // a card-like number
		{"sk_live_abc"},      // a secret token
		{strings.Repeat("a", 200)},
		{"a", ""},
	} {
		id := ingest.EventID("src", parts...)
		require.True(t, strings.HasPrefix(id, "src:sha256-"), "%q -> %s", parts, id)
		require.Len(t, id, len("src:sha256-")+32)
		require.Equal(t, id, ingest.EventID("src", parts...))
	}
	require.NotEqual(t, ingest.EventID("s", "a b", "c"), ingest.EventID("s", "a", "b c"))
}
