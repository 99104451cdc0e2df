package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
)

// TestHeldBackCodesAreTheAdapters: the codes the answers call "held back by
// a rate limit" are exactly those the worker spends no retry budget on.
func TestHeldBackCodesAreTheAdapters(t *testing.T) {
	for _, code := range []string{adapters.CodeClientRateLimit, adapters.CodeTargetRateLimit, adapters.CodeHTTP429,
		adapters.CodeHTTP503, adapters.CodeHTTP502, adapters.CodeConnectionRefused, adapters.CodeTimeoutAfterRequestSent, ""} {
		require.Equal(t, adapters.Throttled(code), heldBack(code), code)
	}
}
