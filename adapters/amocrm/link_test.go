package amocrm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/amocrm"
	"github.com/idemgate/idemgate/redact"
)

func TestObjectURL(t *testing.T) {
	t.Parallel()
	a, err := amocrm.New(amocrm.Config{BaseURL: "https://example.amocrm.ru", Token: adapters.Token{Value: redact.Secret("token")}, KeyFieldID: 7})
	require.NoError(t, err)
	require.Equal(t, "https://example.amocrm.ru/leads/detail/1234", a.ObjectURL(amocrm.OpDealCreate, "1234"))
	require.Empty(t, a.ObjectURL(amocrm.OpTaskCreate, "1234"), "a task has no page of its own")
	require.Empty(t, a.ObjectURL(amocrm.OpDealCreate, "x1"), "only numeric ids")
}
