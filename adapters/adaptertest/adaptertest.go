package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

// Sandbox is what the suite needs of the emulator behind an adapter; every
// sandbox emulator Server satisfies it.
type Sandbox interface {
	Effects(key string) int
	TotalEffects() int
	InjectFault(f sandbox.Fault) error
	ClearFaults()
}

// Setup is one fresh adapter wired to one fresh emulator.
type Setup struct {
	Adapter adapters.Adapter
	Sandbox Sandbox
	// Advance, when set, moves the emulator's clock forward (search lag,
	// settle time). Nil when the setup has no lag.
	Advance func(time.Duration)
	// Seed, when set, is called with every operation the suite builds for
	// this setup before it uses it: it makes what the operation refers to
	// exist in the target, as it would in production (the invoice a
	// cancellation cancels), without a ledger effect. Nil for operations
	// that stand alone.
	Seed func(op operation.Operation)
}

// Harness describes an adapter to the suite.
type Harness struct {
	// New returns a fresh setup (its own emulator); it registers cleanups
	// with t.Cleanup. The adapter's HTTP timeout should be short (about a
	// second) since lost-response cases wait for it.
	New func(t *testing.T) Setup
	// Op builds a valid operation for a fresh intent id. Variant 0 is the
	// base payload; any other variant changes a significant field (another
	// fingerprint) under the same key.
	Op func(intent string, variant int) operation.Operation
	// Invalid builds an operation the target (or the adapter's own checks)
	// rejects as invalid.
	Invalid func(intent string) operation.Operation
	// LedgerKey is the key the emulator's ledger counts the operation under.
	// Default: op.Key.String().
	LedgerKey func(op operation.Operation) string
	// Secret is the credential the setup uses; no error text may contain it.
	Secret string

	// ReplayDedup: a replayed Execute with the same key makes no new effect.
	ReplayDedup bool
	// DetectsMismatch: the same key with another payload is refused with
	// never_retry idempotency_key_payload_mismatch and no new effect.
	// Otherwise MismatchEffects is the documented number of effects.
	DetectsMismatch bool
	MismatchEffects int
	// IgnoreKeyEffects is how many effects two Executes of one key make
	// behind a connector that drops the key: 1 when the adapter catches it,
	// 2 for the residual double-write window (docs/concepts.md, limits).
	IgnoreKeyEffects int
	// ReportsDuplicates: when the connector let a second effect through
	// (IgnoreKeyEffects 2), Lookup by key alone reports it
	// (Outcome.Duplicates, code duplicate_objects).
	ReportsDuplicates bool
	// ConcurrentDedup: concurrent Executes of one key make one effect.
	ConcurrentDedup bool
	// TargetSystem is the class of target a declared adapter serves
	// (adapters/httpjson); empty: one of the built-in 1c, crm, payments.
	TargetSystem string
}

func (h Harness) ledgerKey(op operation.Operation) string {
	if h.LedgerKey != nil {
		return h.LedgerKey(op)
	}
	return op.Key.String()
}

var (
	seqMu sync.Mutex
	seq   int
)

// Intent returns a unique intent id with the given prefix.
func Intent(prefix string) string {
	seqMu.Lock()
	defer seqMu.Unlock()
	seq++
	return fmt.Sprintf("%s-%d", prefix, seq)
}

// Key builds an operation key for tests.
func Key(typ, intent string) operation.Key {
	return operation.Key{Env: "test", Operation: typ, IntentID: intent, Version: "v1"}
}

// decoder decodes the tests' commands as the daemon does, in the tests' env.
var decoder = &operation.Decoder{Env: "test"}

// Op is the Operation the worker hands an adapter for a command of the
// built-in type typ for intent, whose payload holds fields: the command is
// decoded by operation.Decoder, so that its key (Key(typ, intent)), its
// normalised fields and its fingerprint are the daemon's own, never a
// test's guess. The event id is "evt-<intent>", and a type that moves money
// carries the approval "appr-<intent>". A command the decoder refuses
// panics: the test's own input is wrong.
func Op(typ, intent string, fields map[string]any) operation.Operation {
	cmd := operation.Command{EventID: "evt-" + intent, Operation: typ, IntentID: intent}
	if t, ok := operation.DefaultRegistry().Lookup(typ); ok && t.RequiresApproval {
		cmd.ApprovalID = "appr-" + intent
	}
	payload, err := json.Marshal(fields)
	if err != nil {
		panic(fmt.Sprintf("adaptertest.Op %s %s: %v", typ, intent, err))
	}
	cmd.Payload = payload
	op, err := decoder.DecodeCommand(cmd)
	if err != nil {
		panic(fmt.Sprintf("adaptertest.Op %s %s: %v", typ, intent, err))
	}
	return op
}

// RequireClass asserts err is an *adapters.Error of class and (when code is
// not empty) code, and returns it.
func RequireClass(t testing.TB, err error, class adapters.Class, code string) *adapters.Error {
	t.Helper()
	require.Error(t, err)
	var ae *adapters.Error
	require.True(t, errors.As(err, &ae), "error is not an *adapters.Error: %v", err)
	require.Equal(t, class, ae.Class, "class of %v", err)
	if code != "" {
		require.Equal(t, code, ae.Code, "code of %v", err)
	}
	return ae
}

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.New, "Harness.New")
	require.NotNil(t, h.Op, "Harness.Op")
	s := &suite{h: h}
	cases := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Capabilities", s.capabilities},
		{"ExecuteOnce", s.executeOnce},
		{"ReplaySameKey", s.replay},
		{"LostResponse", s.lostResponse},
		{"ResetBeforeProcessing", s.resetBefore},
		{"Throttled", s.throttled},
		{"Validation", s.validation},
		{"KeyPayloadMismatch", s.mismatch},
		{"LookupUnknown", s.lookupUnknown},
		{"IgnoreKeyConnector", s.ignoreKey},
		{"IgnoreKeyLookup", s.ignoreKeyLookup},
		{"BadAnswers", s.badAnswers},
		{"Concurrent", s.concurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t)
		})
	}
}

type suite struct{ h Harness }

// op is Harness.Op for intent and variant, seeded in st (Setup.Seed).
func (s *suite) op(st Setup, intent string, variant int) operation.Operation {
	o := s.h.Op(intent, variant)
	if st.Seed != nil {
		st.Seed(o)
	}
	return o
}

// invalid is Harness.Invalid for intent, seeded in st.
func (s *suite) invalid(st Setup, intent string) operation.Operation {
	o := s.h.Invalid(intent)
	if st.Seed != nil {
		st.Seed(o)
	}
	return o
}

func (s *suite) setup(t *testing.T) Setup {
	st := s.h.New(t)
	require.NotNil(t, st.Adapter)
	require.NotNil(t, st.Sandbox)
	return st
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func (s *suite) noSecret(t *testing.T, err error) {
	t.Helper()
	if err == nil || s.h.Secret == "" {
		return
	}
	require.NotContains(t, err.Error(), s.h.Secret, "error text holds the credential")
}

// settle moves the clock past the adapter's settle time when the setup can.
func settle(st Setup) {
	if st.Advance != nil {
		if d := st.Adapter.Capabilities().SettleTime; d > 0 {
			st.Advance(d)
		}
	}
}

func (s *suite) capabilities(t *testing.T) {
	st := s.setup(t)
	a := st.Adapter
	require.NotEmpty(t, a.Name())
	if s.h.TargetSystem != "" {
		require.Equal(t, s.h.TargetSystem, a.TargetSystem())
	} else {
		require.Contains(t, []string{"1c", "crm", "payments"}, a.TargetSystem())
	}
	c := a.Capabilities()
	require.True(t, c.Lookup, "every adapter must support Lookup by key")
	require.Positive(t, c.MaxKeyLen)
	require.GreaterOrEqual(t, c.SettleTime, time.Duration(0))
	if c.SingleFlight {
		require.False(t, c.NativeKey, "a target that deduplicates needs no single-flight")
	}
}

func (s *suite) executeOnce(t *testing.T) {
	st := s.setup(t)
	op := s.op(st, Intent("once"), 0)
	out, err := st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	require.NotEmpty(t, out.ObjectID)
	require.NotEmpty(t, out.BusinessStatus)
	require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
	require.Equal(t, 1, st.Sandbox.TotalEffects())

	settle(st)
	lr, err := st.Adapter.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
	require.False(t, lr.Final)
}

func (s *suite) replay(t *testing.T) {
	st := s.setup(t)
	op := s.op(st, Intent("replay"), 0)
	first, err := st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	settle(st)
	second, err := st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	if s.h.ReplayDedup {
		require.Equal(t, first.ObjectID, second.ObjectID)
		require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
	} else {
		require.Equal(t, 2, st.Sandbox.Effects(s.h.ledgerKey(op)), "declared: the target cannot recognise a replay")
	}
}

func (s *suite) lostResponse(t *testing.T) {
	kinds := []struct {
		kind sandbox.FaultKind
		code string
	}{
		{sandbox.FaultLoseResponseHang, adapters.CodeTimeoutAfterRequestSent},
		{sandbox.FaultLoseResponseClose, adapters.CodeConnectionLostWhileWaiting},
		{sandbox.FaultResetAfterCommit, adapters.CodeConnectionLostWhileWaiting},
		// The whole request was written: the 500 may follow a commit.
		{sandbox.FaultHTTP500AfterCommit, adapters.CodeHTTP500},
		{sandbox.FaultTruncateAfterCommit, adapters.CodeUnexpectedResponse},
	}
	for _, k := range kinds {
		t.Run(string(k.kind), func(t *testing.T) {
			t.Parallel()
			st := s.setup(t)
			op := s.op(st, Intent("lost"), 0)
			require.NoError(t, st.Sandbox.InjectFault(sandbox.Fault{Kind: k.kind, Count: 1}))
			_, err := st.Adapter.Execute(ctx(t), op)
			RequireClass(t, err, adapters.ReconcileBeforeRetry, k.code)
			s.noSecret(t, err)
			require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)), "the target committed once")

			settle(st)
			lr, err := st.Adapter.Lookup(ctx(t), op)
			require.NoError(t, err)
			require.Equal(t, adapters.Found, lr.Status)
			require.NotEmpty(t, lr.Outcome.ObjectID)

			// The reconciler may hold only the key: the lookup must find the
			// same object and never call it a payload mismatch.
			keyOnly := op
			keyOnly.Fields = nil
			kr, err := st.Adapter.Lookup(ctx(t), keyOnly)
			require.NoError(t, err)
			require.Equal(t, adapters.Found, kr.Status, "lookup by key alone")
			require.Equal(t, lr.Outcome.ObjectID, kr.Outcome.ObjectID)
			require.NotEqual(t, adapters.CodeKeyPayloadMismatch, kr.Code)

			if s.h.ReplayDedup {
				out, err := st.Adapter.Execute(ctx(t), op)
				require.NoError(t, err)
				require.Equal(t, lr.Outcome.ObjectID, out.ObjectID)
				require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
			}
		})
	}
}

func (s *suite) resetBefore(t *testing.T) {
	st := s.setup(t)
	op := s.op(st, Intent("reset"), 0)
	require.NoError(t, st.Sandbox.InjectFault(sandbox.Fault{Kind: sandbox.FaultResetBefore, Count: 1}))
	_, err := st.Adapter.Execute(ctx(t), op)
	// The request was written before the reset: the adapter cannot know it
	// was not processed, so it must not claim "retry".
	RequireClass(t, err, adapters.ReconcileBeforeRetry, "")
	require.Equal(t, 0, st.Sandbox.Effects(s.h.ledgerKey(op)))

	settle(st)
	lr, err := st.Adapter.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)

	_, err = st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
}

func (s *suite) throttled(t *testing.T) {
	cases := []struct {
		kind       sandbox.FaultKind
		retryAfter time.Duration
		class      adapters.Class
	}{
		{sandbox.FaultHTTP429, 3 * time.Second, adapters.Retry},
		{sandbox.FaultHTTP503, 2 * time.Second, adapters.Retry},
		{sandbox.FaultHTTP502, 0, adapters.ReconcileBeforeRetry}, // a gateway's 502 may follow a commit upstream
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			st := s.setup(t)
			op := s.op(st, Intent("throttle"), 0)
			require.NoError(t, st.Sandbox.InjectFault(sandbox.Fault{Kind: c.kind, Count: 1, RetryAfter: c.retryAfter}))
			_, err := st.Adapter.Execute(ctx(t), op)
			ae := RequireClass(t, err, c.class, "")
			s.noSecret(t, err)
			if c.retryAfter > 0 {
				require.Equal(t, c.retryAfter, ae.RetryAfter, "Retry-After carried")
			}
			require.Equal(t, 0, st.Sandbox.Effects(s.h.ledgerKey(op)))

			out, err := st.Adapter.Execute(ctx(t), op)
			require.NoError(t, err)
			require.NotEmpty(t, out.ObjectID)
			require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
		})
	}
}

func (s *suite) validation(t *testing.T) {
	if s.h.Invalid == nil {
		t.Skip("harness has no invalid operation")
	}
	st := s.setup(t)
	op := s.invalid(st, Intent("invalid"))
	_, err := st.Adapter.Execute(ctx(t), op)
	RequireClass(t, err, adapters.NeverRetry, adapters.CodeValidation)
	s.noSecret(t, err)
	require.Equal(t, 0, st.Sandbox.TotalEffects())
}

func (s *suite) mismatch(t *testing.T) {
	st := s.setup(t)
	intent := Intent("mismatch")
	op := s.op(st, intent, 0)
	other := s.op(st, intent, 1)
	require.Equal(t, op.Key, other.Key)
	require.NotEqual(t, op.Fingerprint, other.Fingerprint, "variant 1 must change the fingerprint")
	_, err := st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	settle(st)
	_, err = st.Adapter.Execute(ctx(t), other)
	if s.h.DetectsMismatch {
		RequireClass(t, err, adapters.NeverRetry, adapters.CodeKeyPayloadMismatch)
		require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
		return
	}
	require.Equal(t, s.h.MismatchEffects, st.Sandbox.Effects(s.h.ledgerKey(op)), "declared behaviour on key reuse with another payload (the journal refuses it first)")
}

func (s *suite) lookupUnknown(t *testing.T) {
	st := s.setup(t)
	settle(st)
	lr, err := st.Adapter.Lookup(ctx(t), s.op(st, Intent("unknown"), 0))
	require.NoError(t, err)
	require.Equal(t, adapters.NotFound, lr.Status)
	require.Equal(t, 0, st.Sandbox.TotalEffects())
}

func (s *suite) ignoreKey(t *testing.T) {
	st := s.setup(t)
	op := s.op(st, Intent("ignorekey"), 0)
	require.NoError(t, st.Sandbox.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey, Scope: sandbox.ScopeAny}))
	_, err := st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	settle(st)
	_, err = st.Adapter.Execute(ctx(t), op)
	if err != nil {
		// An adapter may notice the key was dropped and refuse to go on.
		RequireClass(t, err, adapters.NeverRetry, "")
	}
	want := s.h.IgnoreKeyEffects
	if want == 0 {
		want = 2
	}
	require.Equal(t, want, st.Sandbox.Effects(s.h.ledgerKey(op)),
		"effects behind a connector that drops the key (2 = the documented residual double-write window)")
	if want < 2 || !s.h.ReportsDuplicates {
		return
	}
	st.Sandbox.ClearFaults()
	settle(st)
	keyOnly := op
	keyOnly.Fields = nil
	lr, err := st.Adapter.Lookup(ctx(t), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Len(t, lr.Outcome.Duplicates, 1, "the second effect is reported")
	require.NotEqual(t, lr.Outcome.ObjectID, lr.Outcome.Duplicates[0])
	require.Equal(t, adapters.CodeDuplicateObjects, lr.Code)
}

// ignoreKeyLookup: an object created behind a connector that drops the key
// (its header or external-ID field) is still found by Lookup, with the
// payload and by key alone, and the lookup reports no duplicate.
func (s *suite) ignoreKeyLookup(t *testing.T) {
	st := s.setup(t)
	op := s.op(st, Intent("ignorekeylookup"), 0)
	require.NoError(t, st.Sandbox.InjectFault(sandbox.Fault{Kind: sandbox.FaultIgnoreKey, Scope: sandbox.ScopeAny}))
	out, err := st.Adapter.Execute(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
	st.Sandbox.ClearFaults()
	settle(st)
	keyOnly := op
	keyOnly.Fields = nil
	for _, o := range []operation.Operation{op, keyOnly} {
		lr, err := st.Adapter.Lookup(ctx(t), o)
		require.NoError(t, err)
		require.Equal(t, adapters.Found, lr.Status, "the object the connector created without our key")
		require.Equal(t, out.ObjectID, lr.Outcome.ObjectID)
		require.Empty(t, lr.Outcome.Duplicates)
	}
}

func (s *suite) badAnswers(t *testing.T) {
	cases := []struct {
		name   string
		fault  sandbox.Fault
		lookup bool
	}{
		{"garbage_200_after_commit", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 200, Body: "\x00\xffnot json", Commit: true}, false},
		{"html_200_before", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 200, Body: "<html>proxy</html>"}, false},
		{"empty_object_201", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 201, Body: "{}"}, false},
		{"json_null", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 200, Body: "null"}, false},
		{"wrong_types", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 200, Body: `{"id":[1],"result":{"x":true},"ref":7,"_embedded":3}`}, false},
		{"teapot", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 418, Body: "teapot"}, false},
		{"redirect", sandbox.Fault{Kind: sandbox.FaultRawResponse, Count: 1, Status: 302, Body: ""}, false},
		{"lookup_garbage", sandbox.Fault{Kind: sandbox.FaultRawResponse, Scope: sandbox.ScopeRead, Count: 1, Status: 200, Body: "{\"value\":"}, true},
		{"lookup_500", sandbox.Fault{Kind: sandbox.FaultRawResponse, Scope: sandbox.ScopeRead, Count: 1, Status: 500, Body: "oops"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := s.setup(t)
			op := s.op(st, Intent("bad"), 0)
			require.NoError(t, st.Sandbox.InjectFault(c.fault))
			if c.lookup {
				lr, err := st.Adapter.Lookup(ctx(t), op)
				if err == nil {
					require.Equal(t, adapters.Indeterminate, lr.Status, "a garbled lookup answer is never a verdict")
					return
				}
				ae := adapters.AsError(err)
				require.NotEmpty(t, ae.Code)
				require.True(t, ae.Class.Valid())
				s.noSecret(t, err)
				return
			}
			out, err := st.Adapter.Execute(ctx(t), op)
			require.Error(t, err, "a garbled answer is never a success (got %+v)", out)
			ae := adapters.AsError(err)
			require.NotEmpty(t, ae.Code)
			require.True(t, ae.Class.Valid())
			if c.fault.Commit || (c.fault.Status >= 200 && c.fault.Status < 400) {
				require.Equal(t, adapters.ReconcileBeforeRetry, ae.Class, "the request may have had an effect")
			}
			require.NotContains(t, err.Error(), "not json")
			require.NotContains(t, err.Error(), "proxy</html>")
			s.noSecret(t, err)
		})
	}
}

// concurrentDuplicates checks what a harness declaring !ConcurrentDedup
// promises instead of one effect: the target does not serialise concurrent
// Executes of one key (the journal's lease does), but each Execute makes at
// most one effect, under that key only; what it returns is a real object;
// the lookup finds the key and reports duplicates as such; and once the
// Executes are serialised, as the lease makes them, a repeat adds nothing.
func (s *suite) concurrentDuplicates(t *testing.T, st Setup, op operation.Operation, ids []string, errs []error) {
	key := s.h.ledgerKey(op)
	require.False(t, st.Adapter.Capabilities().NativeKey, "a target that deduplicates by key natively must serialise concurrent Executes (ConcurrentDedup)")
	effects := st.Sandbox.Effects(key)
	require.GreaterOrEqual(t, effects, 1, "concurrent Executes made no effect")
	require.LessOrEqual(t, effects, len(ids), "more effects than Executes")
	require.Equal(t, effects, st.Sandbox.TotalEffects(), "effects under another key")
	returned := map[string]bool{}
	for i := range ids {
		if errs[i] != nil {
			ae := adapters.AsError(errs[i])
			require.NotEqual(t, adapters.NeverRetry, ae.Class, "concurrent duplicate: %v", errs[i])
			s.noSecret(t, errs[i])
			continue
		}
		require.NotEmpty(t, ids[i], "a successful Execute names its object")
		returned[ids[i]] = true
	}
	require.LessOrEqual(t, len(returned), effects, "objects returned that the target never created")

	settle(st)
	lr, err := st.Adapter.Lookup(ctx(t), op)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status, "the lookup finds what the concurrent Executes made")
	if len(returned) > 0 {
		require.True(t, returned[lr.Outcome.ObjectID], "the lookup found %q, none of the objects Execute returned", lr.Outcome.ObjectID)
	}
	if effects > 1 {
		require.Equal(t, adapters.CodeDuplicateObjects, lr.Code, "%d objects for one key must be reported as duplicates", effects)
	}
	t.Logf("declared: %d concurrent Executes of one key made %d objects, reported by the lookup; the journal lease prevents this", len(ids), effects)

	if s.h.ReplayDedup {
		_, err := st.Adapter.Execute(ctx(t), op)
		require.NoError(t, err)
		require.Equal(t, effects, st.Sandbox.Effects(key), "a serialised repeat after the race made another effect")
	}
}

func (s *suite) concurrent(t *testing.T) {
	st := s.setup(t)
	op := s.op(st, Intent("concurrent"), 0)
	const n = 6
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := st.Adapter.Execute(ctx(t), op)
			ids[i], errs[i] = out.ObjectID, err
		}()
	}
	wg.Wait()
	if !s.h.ConcurrentDedup {
		s.concurrentDuplicates(t, st, op, ids, errs)
		return
	}
	var got string
	for i := range n {
		if errs[i] != nil {
			// The target may refuse a concurrent duplicate (in flight).
			ae := adapters.AsError(errs[i])
			require.NotEqual(t, adapters.NeverRetry, ae.Class, "concurrent duplicate: %v", errs[i])
			continue
		}
		if got == "" {
			got = ids[i]
		}
		require.Equal(t, got, ids[i])
	}
	require.Equal(t, 1, st.Sandbox.Effects(s.h.ledgerKey(op)))
}
