package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/sandbox"
	"github.com/idemgate/idemgate/sandbox/bitrix24"
	"github.com/idemgate/idemgate/sandbox/onec"
	"github.com/idemgate/idemgate/sandbox/tbank"
	"github.com/idemgate/idemgate/sandbox/yookassa"
)

// targets are the three kinds of target: an invoice in 1C, a
// payment (YooKassa with its Idempotence-Key, T-Bank with OrderId lookup),
// a CRM task (Bitrix24, external id without uniqueness).
var targets = []target{
	{
		name: "1c_invoice", operation: "invoice.create", adapter: "onec",
		payloadCanaries: []string{"cust-42"},
		start:           startOneC,
		payload: func(intent string, changed bool) json.RawMessage {
			amount := 125000
			if changed {
				amount = 135000
			}
			return json.RawMessage(fmt.Sprintf(`{"order_id":%q,"customer_id":"cust-42","amount_minor":%d,"currency":"rub","due_date":"2030-01-31"}`, intent, amount))
		},
	},
	{
		name: "yookassa_payment", operation: "payment.charge", adapter: "yookassa", approval: true,
		payloadCanaries: []string{"merchant-account-17"},
		start:           startYooKassa,
		payload: func(intent string, changed bool) json.RawMessage {
			amount := 125000
			if changed {
				amount = 135000
			}
			return json.RawMessage(fmt.Sprintf(`{"account_id":"merchant-account-17","order_id":%q,"amount_minor":%d,"currency":"rub"}`, intent, amount))
		},
	},
	{
		// T-Bank has no idempotency key: the operation key is the OrderId,
		// looked up (CheckOrder) before Init and Charge.
		name: "tbank_payment", operation: "payment.charge", adapter: "tbank", approval: true,
		payloadCanaries: []string{"9000000042"},
		start:           startTBank,
		payload: func(intent string, changed bool) json.RawMessage {
			amount := 125000
			if changed {
				amount = 135000
			}
			return json.RawMessage(fmt.Sprintf(`{"account_id":"9000000042","order_id":%q,"amount_minor":%d,"currency":"rub"}`, intent, amount))
		},
	},
	{
		name: "bitrix24_task", operation: "crm.task.create", adapter: "bitrix24",
		payloadCanaries: []string{"Call the customer back"},
		// Bitrix24 keeps ORIGIN_ID without a uniqueness check: a "not found"
		// is trusted only after settle_time, which must outlast the longest
		// time a request can sit in the target (check 12 holds one for
		// lateLanding). TestBitrix24LateAddWithDefaultSettleTime runs it with the default.
		start: startBitrix24(lateLanding + 3*time.Second),
		payload: func(intent string, changed bool) json.RawMessage {
			// A task has no amount: the significant field changed is the title.
			title := "Call the customer back about " + intent
			if changed {
				title = "Call the customer back about a refund for " + intent
			}
			return json.RawMessage(fmt.Sprintf(`{"title":%q,"responsible_id":"7","customer_id":"42","deadline":"2030-01-31T09:00:00+03:00"}`, title))
		},
	},
}

// secret returns a fresh credential, so that a leak is recognisable.
func secret(t *testing.T, prefix string) string {
	t.Helper()
	var b [10]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return prefix + hex.EncodeToString(b[:])
}

// serve serves an emulator on a free loopback port through a front that
// logs the requests that may create an object (isCreate), so that tests see
// calls reach the target and finish, not only effects. It returns the base
// URL.
func serve(t *testing.T, core *sandbox.Core, isCreate func(*http.Request) bool) (string, *requestLog) {
	t.Helper()
	log := &requestLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: log.wrap(core.Handler(), isCreate), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	// Runs first: releases hanging responses before the server closes.
	t.Cleanup(func() { _ = core.Close() })
	return "http://" + ln.Addr().String(), log
}

// requestLog counts create requests that reached the target and finished
// (answered, hung up or aborted).
type requestLog struct {
	mu               sync.Mutex
	started, settled int
}

func (l *requestLog) wrap(h http.Handler, isCreate func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isCreate(r) {
			h.ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		l.started++
		l.mu.Unlock()
		defer func() { // also when the emulator aborts the handler
			l.mu.Lock()
			l.settled++
			l.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// creates returns how many create requests arrived and how many finished.
func (l *requestLog) creates() (started, settled int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started, l.settled
}

func sandboxOptions() sandbox.Options {
	// A lost response hangs until the client gives up or dies; bounded
	// anyway so a broken test cannot hang on it.
	return sandbox.Options{MaxHang: 20 * time.Second}
}

func startOneC(t *testing.T) targetSandbox {
	pw := secret(t, "e2e-1c-")
	s := onec.New(onec.Options{Options: sandboxOptions(), User: "integration", Password: pw})
	url, log := serve(t, s.Core, func(r *http.Request) bool { return r.Method == http.MethodPost })
	return targetSandbox{
		core: s.Core, requests: log,
		adapterYAML: fmt.Sprintf("  onec:\n    base_url: %q\n    user: integration\n    timeout: 10s\n", url+onec.DefaultBasePath),
		env:         []string{"IDEMGATE_ONEC_PASSWORD=" + pw},
		secrets:     []string{pw},
	}
}

func startYooKassa(t *testing.T) targetSandbox {
	key := secret(t, "test_e2e_")
	s := yookassa.New(yookassa.Options{Options: sandboxOptions(), ShopID: "100500", SecretKey: key})
	url, log := serve(t, s.Core, func(r *http.Request) bool { return r.Method == http.MethodPost })
	return targetSandbox{
		core: s.Core, requests: log,
		adapterYAML: fmt.Sprintf("  yookassa:\n    base_url: %q\n    timeout: 10s\n", url),
		env:         []string{"YOOKASSA_SHOP_ID=100500", "YOOKASSA_SECRET_KEY=" + key},
		secrets:     []string{key},
	}
}

func startTBank(t *testing.T) targetSandbox {
	pw := secret(t, "e2e_terminal_")
	s := tbank.New(tbank.Options{Options: sandboxOptions(), TerminalKey: "E2ETerminalDEMO", Password: pw})
	url, log := serve(t, s.Core, func(r *http.Request) bool { return r.URL.Path == "/v2/Charge" })
	return targetSandbox{
		core: s.Core, requests: log,
		adapterYAML: fmt.Sprintf("  tbank:\n    base_url: %q\n    terminal_key: E2ETerminalDEMO\n    timeout: 10s\n", url),
		env:         []string{"TBANK_PASSWORD=" + pw},
		secrets:     []string{pw},
	}
}

// startBitrix24 starts the Bitrix24 emulator; the adapter gets settle_time
// settle (0: the adapter's default).
func startBitrix24(settle time.Duration) func(t *testing.T) targetSandbox {
	return func(t *testing.T) targetSandbox {
		code := secret(t, "e2ehook")
		s := bitrix24.New(bitrix24.Options{Options: sandboxOptions(), UserID: "1", WebhookCode: code})
		url, log := serve(t, s.Core, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".add.json") })
		yaml := fmt.Sprintf("  bitrix24:\n    portal_url: %q\n    user_id: \"1\"\n    timeout: 10s\n", url)
		if settle > 0 {
			yaml += fmt.Sprintf("    settle_time: %s\n", settle)
		}
		return targetSandbox{
			core: s.Core, requests: log, adapterYAML: yaml,
			env:     []string{"IDEMGATE_BITRIX24_WEBHOOK_CODE=" + code},
			secrets: []string{code},
		}
	}
}
