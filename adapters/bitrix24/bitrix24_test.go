package bitrix24_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	sb "github.com/idemgate/idemgate/sandbox/bitrix24"
)

func dealOp(intent string, variant int) operation.Operation {
	return operation.Operation{
		Key: adaptertest.Key(bitrix24.OpDealCreate, intent), Type: bitrix24.OpDealCreate, TargetSystem: "crm",
		Fields: map[string]any{
			"title": "Deal " + intent, "customer_id": "17", "amount_minor": int64(100000 + variant*100), "currency": "RUB",
		},
		Fingerprint: fmt.Sprintf("fp-%s-%d", intent, variant),
	}
}

func taskOp(intent string, variant int) operation.Operation {
	return operation.Operation{
		Key: adaptertest.Key(bitrix24.OpTaskCreate, intent), Type: bitrix24.OpTaskCreate, TargetSystem: "crm",
		Fields: map[string]any{
			"title": fmt.Sprintf("Call back %s v%d", intent, variant), "responsible_id": "5", "customer_id": "17",
			"deadline": time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC), "description": "callback",
		},
		Fingerprint: fmt.Sprintf("fp-%s-%d", intent, variant),
	}
}

func setup(t *testing.T, opts sb.Options) (*bitrix24.Adapter, *sb.Server) {
	t.Helper()
	srv := sb.New(opts)
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	uid, code := srv.Credentials()
	a, err := bitrix24.New(bitrix24.Config{PortalURL: srv.URL(), UserID: uid, WebhookCode: redact.Secret(code), Timeout: time.Second})
	require.NoError(t, err)
	return a, srv
}

func harness(op func(string, int) operation.Operation, invalid func(string) operation.Operation) adaptertest.Harness {
	return adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			a, srv := setup(t, sb.Options{})
			return adaptertest.Setup{Adapter: a, Sandbox: srv}
		},
		Op: op, Invalid: invalid, Secret: sb.DefaultWebhookCode,
		ReplayDedup:     true, // list before add, under the per-key lock
		DetectsMismatch: true, // the found object is compared with the payload
		// The connector drops ORIGIN_ID: nothing to find, the replay adds again.
		IgnoreKeyEffects: 2,
		ConcurrentDedup:  true,
	}
}

func TestContractDeal(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, harness(dealOp, func(intent string) operation.Operation {
		o := dealOp(intent, 0)
		o.Fields["currency"] = "XXX" // the portal refuses it (400)
		return o
	}))
}

func TestContractTask(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, harness(taskOp, func(intent string) operation.Operation {
		o := taskOp(intent, 0)
		o.Fields["responsible_id"] = "nobody" // the portal refuses it (400)
		return o
	}))
}

func TestQueryLimitIsRetry(t *testing.T) {
	t.Parallel()
	a, srv := setup(t, sb.Options{Bucket: 2, LeakPerSec: 1})
	_, err := a.Execute(context.Background(), dealOp(adaptertest.Intent("limit"), 0)) // list, add: 2 units
	require.NoError(t, err)
	_, err = a.Execute(context.Background(), dealOp(adaptertest.Intent("limit"), 0))
	adaptertest.RequireClass(t, err, adapters.Retry, adapters.CodeHTTP503)
	require.Equal(t, 1, srv.TotalEffects())
}

func TestWrongWebhookCode(t *testing.T) {
	t.Parallel()
	srv := sb.New(sb.Options{})
	_, err := srv.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	a, err := bitrix24.New(bitrix24.Config{PortalURL: srv.URL(), UserID: "1", WebhookCode: "wrongcode123"})
	require.NoError(t, err)
	_, err = a.Execute(context.Background(), dealOp(adaptertest.Intent("auth"), 0))
	adaptertest.RequireClass(t, err, adapters.NeverRetry, adapters.CodeAuthorizationDenied)
	require.NotContains(t, err.Error(), "wrongcode123")
	require.Equal(t, 0, srv.TotalEffects())
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]bitrix24.Config{
		"no_url":   {UserID: "1"},
		"path":     {PortalURL: "https://x.bitrix24.ru/rest/1/code", UserID: "1"},
		"no_user":  {PortalURL: "https://x.bitrix24.ru"},
		"bad_user": {PortalURL: "https://x.bitrix24.ru", UserID: "1/2"},
	} {
		require.ErrorIs(t, c.WithDefaults().Validate(), bitrix24.ErrInvalidConfig, name)
	}
	_, err := bitrix24.New(bitrix24.Config{PortalURL: "https://x.bitrix24.ru", UserID: "1", Getenv: func(string) string { return "" }})
	require.ErrorIs(t, err, adapters.ErrNoCredential)
	a, err := bitrix24.New(bitrix24.Config{PortalURL: "https://x.bitrix24.ru", UserID: "1", WebhookCode: "abc"})
	require.NoError(t, err)
	require.True(t, a.Capabilities().SingleFlight)
}
