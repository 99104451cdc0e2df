package stripe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

// TestRateLimitByKeyMode: Stripe's default limit follows the key's mode,
// 25/s for a test key (sk_test_, rk_test_) and 100/s otherwise, as its
// published limits are; a configured rate wins.
func TestRateLimitByKeyMode(t *testing.T) {
	limit := func(key string, own adapters.RateLimit) adapters.RateLimit {
		cfg := Config{SecretKey: adapters.SecretKey{Value: redact.Secret(key)}}
		cfg.RateLimit = own
		a, err := New(cfg)
		require.NoError(t, err)
		return a.cfg.RateLimit
	}
	require.Equal(t, DefaultTestRateLimit, limit("sk_test_4eC39HqLyjWDarjtT1zdp7dc", adapters.RateLimit{}))
	require.Equal(t, DefaultTestRateLimit, limit("rk_test_51Hxyz", adapters.RateLimit{}))
	require.Equal(t, DefaultLiveRateLimit, limit("sk_live_51Hxyz", adapters.RateLimit{}))
	require.Equal(t, 25.0, DefaultTestRateLimit.Rate)
	require.Equal(t, 100.0, DefaultLiveRateLimit.Rate)
	require.Equal(t, 3.0, limit("sk_live_51Hxyz", adapters.RateLimit{Rate: 3}).Rate)
}
