package adapters_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/amocrm"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/adapters/onec"
	"github.com/idemgate/idemgate/adapters/stripe"
	"github.com/idemgate/idemgate/adapters/tbank"
	"github.com/idemgate/idemgate/adapters/yookassa"
)

// Every built-in adapter lets the worker wait for a call's place in its
// client-side bucket before it takes an attempt.
var (
	_ adapters.Admitter = (*amocrm.Adapter)(nil)
	_ adapters.Admitter = (*bitrix24.Adapter)(nil)
	_ adapters.Admitter = (*httpjson.Adapter)(nil)
	_ adapters.Admitter = (*onec.Adapter)(nil)
	_ adapters.Admitter = (*stripe.Adapter)(nil)
	_ adapters.Admitter = (*tbank.Adapter)(nil)
	_ adapters.Admitter = (*yookassa.Adapter)(nil)
)

// TestRateLimitDefaults: each adapter's client-side bucket defaults to its
// target's published limit, as docs/targets.md states (Bitrix24 2/s in bursts
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
