package httpjson_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters/adaptertest"
	"github.com/idemgate/idemgate/adapters/httpjson/httpjsontest"
	"github.com/idemgate/idemgate/operation"
)

var registry = httpjsontest.Registry()

// shipmentOp decodes a shipment.create command through the registry, as
// the worker gets it: variant 1 changes the quantity (a significant
// field); the comment (free text) changes with every variant too.
func shipmentOp(intent string, variant int) operation.Operation {
	return decode(fmt.Sprintf(`{"order_id":"SO-%s","quantity":%d,"declared_value":125000,"currency":"rub","comment":"ring twice, variant %d"}`, intent, 3+variant, variant), intent)
}

func decode(payload, intent string) operation.Operation {
	d := operation.Decoder{Env: "test", Registry: registry}
	op, err := d.Decode([]byte(`{"event_id":"ev-` + intent + `","operation":"shipment.create","intent_id":"` + intent + `","payload":` + payload + `}`))
	if err != nil {
		panic(err)
	}
	return op
}

func harness(name string) adaptertest.Harness {
	cfg := httpjsontest.Declarations()[name]
	return adaptertest.Harness{
		New: func(t *testing.T) adaptertest.Setup {
			clock := httpjsontest.NewClock()
			srv, err := httpjsontest.Emulator(name, cfg, clock.Now)
			require.NoError(t, err)
			url, err := srv.Start("")
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			a, err := httpjsontest.Adapter(name, cfg, url, time.Second, registry)
			require.NoError(t, err)
			return adaptertest.Setup{Adapter: a, Sandbox: srv, Advance: clock.Advance}
		},
		Op: shipmentOp,
		Invalid: func(intent string) operation.Operation {
			return decode(`{"order_id":"SO-x","quantity":0}`, intent) // the target refuses it (400)
		},
		Secret:          httpjsontest.Token,
		TargetSystem:    "warehouse",
		ReplayDedup:     true,
		DetectsMismatch: true,
	}
}

// TestContractNativeHeader: the target honours Idempotency-Key; a
// connector that drops the header lets a second object through, which
// the search on the key kept in metadata reports.
func TestContractNativeHeader(t *testing.T) {
	t.Parallel()
	h := harness("parcels")
	h.IgnoreKeyEffects, h.ReportsDuplicates = 2, true
	h.ConcurrentDedup = true
	adaptertest.Run(t, h)
}

// TestContractExternalIDLookup: a unique externalCode; the duplicate
// answer turns into a lookup by code that returns the object (compared
// with the payload). A connector that drops the code leaves the marker.
func TestContractExternalIDLookup(t *testing.T) {
	t.Parallel()
	h := harness("warehouse")
	h.IgnoreKeyEffects, h.ReportsDuplicates = 2, true
	h.ConcurrentDedup = true
	adaptertest.Run(t, h)
}

// TestContractSearchWithLag: no deduplication and a search index that
// lags by the declared settle time: a per-key search before create (which
// also finds the marker when a connector dropped the external id).
// Concurrent Executes inside the lag make one object: the adapter
// remembers for the settle time what it created under the per-key lock.
func TestContractSearchWithLag(t *testing.T) {
	t.Parallel()
	h := harness("orders")
	h.IgnoreKeyEffects = 1
	h.ConcurrentDedup = true
	adaptertest.Run(t, h)
}
