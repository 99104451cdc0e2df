package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// processSandboxes are the emulators a checkout's steps reach.
type processSandboxes struct {
	oneC     *sbonec.Server
	yooKassa *sbyookassa.Server
	bitrix24 *sbbitrix24.Server
}

func startProcessSandboxes(t *testing.T) *processSandboxes {
	t.Helper()
	sb := &processSandboxes{oneC: sbonec.New(sbonec.Options{}), yooKassa: sbyookassa.New(sbyookassa.Options{}), bitrix24: sbbitrix24.New(sbbitrix24.Options{})}
	for _, s := range []interface {
		Start(string) (string, error)
		Close() error
	}{sb.oneC, sb.yooKassa, sb.bitrix24} {
		_, err := s.Start("")
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
	}
	return sb
}

// configure routes the checkout's operation types to the emulators.
func (sb *processSandboxes) configure(c *Config) {
	shop, secret := sb.yooKassa.Credentials()
	user, password := sb.oneC.Credentials()
	uid, code := sb.bitrix24.Credentials()
	short := adapters.HTTPConfig{Timeout: 2 * time.Second}
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: sb.yooKassa.URL(), ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}, HTTPConfig: short}
	c.Adapters.OneC = &onec.Config{BaseURL: sb.oneC.BaseURL(), User: user, Password: adapters.Password{Value: redact.Secret(password)}, HTTPConfig: short}
	c.Adapters.Bitrix24 = &bitrix24.Config{PortalURL: sb.bitrix24.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)}, HTTPConfig: short}
	c.Routes = map[string]string{
		operation.TypePaymentCharge: yookassa.DefaultName, operation.TypePaymentRefund: yookassa.DefaultName,
		operation.TypeInvoiceCreate: onec.DefaultName, operation.TypeInvoiceCancel: onec.DefaultName,
		operation.TypeTaskCreate: bitrix24.DefaultName,
	}
}
