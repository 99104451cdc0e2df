package adapters_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/amocrm"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/adapters/tbank"
	"github.com/idemgate/idemgate/adapters/yookassa"
)

// TestRateLimitDefaults: each adapter's client-side bucket defaults to its
// target's published limit, as the README states (Bitrix24 2/s in bursts
// of 40, amoCRM 7/s in bursts of 5), none where none is published, and a
// configured part wins over the default. Stripe's mode-dependent default
// is TestRateLimitByKeyMode in its package.
func TestRateLimitDefaults(t *testing.T) {
	require.Equal(t, adapters.RateLimit{Rate: 2, Burst: 40}, bitrix24.Config{}.WithDefaults().RateLimit)
	require.Equal(t, adapters.RateLimit{Rate: 7, Burst: 5}, amocrm.Config{}.WithDefaults().RateLimit)
	require.Zero(t, yookassa.Config{}.WithDefaults().RateLimit.Rate)
	require.Zero(t, tbank.Config{}.WithDefaults().RateLimit.Rate)
	require.Zero(t, onec.Config{}.WithDefaults().RateLimit.Rate)

	own := bitrix24.Config{}
	own.RateLimit = adapters.RateLimit{Rate: 1}
	require.Equal(t, adapters.RateLimit{Rate: 1, Burst: 40}, own.WithDefaults().RateLimit, "a configured rate keeps the default burst")
}
