package bitrix24_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/redact"
)

func TestObjectURL(t *testing.T) {
	t.Parallel()
	a, err := bitrix24.New(bitrix24.Config{PortalURL: "https://example.bitrix24.ru/", UserID: "1", WebhookCode: adapters.WebhookCode{Value: redact.Secret("code")}})
	require.NoError(t, err)
	require.Equal(t, "https://example.bitrix24.ru/crm/deal/details/42/", a.ObjectURL(bitrix24.OpDealCreate, "42"))
	require.Empty(t, a.ObjectURL(bitrix24.OpTaskCreate, "42"), "an activity has no page of its own")
	require.Empty(t, a.ObjectURL(bitrix24.OpDealCreate, "42/../../admin"), "only numeric ids")
	require.Empty(t, a.ObjectURL(bitrix24.OpDealCreate, ""))
}
