package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/internal/telemetry"
	"github.com/idemgate/idemgate/internal/telemetry/otelsetup"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// Canaries: an intent id, payload values and the target's credentials no
// span may carry.
const (
	canaryEvent   = "evt-canary-7f3a9"
	canaryAccount = "acct-canary-91c5e"
	canaryOrder   = "order-canary-d04b"
)

// TestTraceOfAChargeThroughUnknownAndReconcile follows one charge whose
// first answer is lost: the agent's span → the producer's publish →
// (NATS) → the daemon's delivery → execute → HTTP POST (answer lost:
// unknown) → pending result → redelivery → reconcile → HTTP GET (found) →
// succeeded result → (NATS) → the result's headers. The in-memory exporter
// must hold the whole tree with its parent links across both NATS hops, the
// claim batches linked to their deliveries, and no key intent part, payload
// value or credential anywhere. Not parallel: it installs the global tracer
// provider.
func TestTraceOfAChargeThroughUnknownAndReconcile(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			var st journal.Store
			if engine == "postgres" {
				st = pgtest.Store(t)
			} else {
				s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "journal.db"), sqlite.Config{})
				require.NoError(t, err)
				t.Cleanup(s.Close)
				st = s
			}
			traceOfAChargeThroughUnknownAndReconcile(t, st)
		})
	}
}

func traceOfAChargeThroughUnknownAndReconcile(t *testing.T, st journal.Store) {
	exp := tracetest.NewInMemoryExporter()
	p := otelsetup.Install(sdktrace.WithSyncer(otelsetup.Redacting(exp)))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })

	reg := prometheus.NewRegistry()
	var logs lockedBuffer
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	sb := sbyookassa.New(sbyookassa.Options{})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	shop, secret := sb.Credentials()
	yk, err := yookassa.New(yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)},
		HTTPConfig: adapters.HTTPConfig{Timeout: 2 * time.Second}})
	require.NoError(t, err)
	ncfg := consumer.Config{AckWait: 15 * time.Second, FetchWait: 50 * time.Millisecond}.WithDefaults()
	cons, err := consumer.Ensure(context.Background(), js, ncfg)
	require.NoError(t, err)
	// No reconciler: the command's redelivery reconciles, in the trace.
	w, err := worker.New(worker.Config{Owner: "trace-test", LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
		HeartbeatInterval: time.Second, Retry: worker.RetryPolicy{InitialDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond}},
		ncfg, worker.Deps{Store: st, JS: js, NC: nc, Consumer: cons, Decoder: &operation.Decoder{Env: "test"},
			Adapters: map[string]adapters.Adapter{"payment.charge": yk}, Metrics: worker.NewMetrics(reg),
			Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)

	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	cl, err := producer.New(nc, "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx, agent := p.TracerProvider().Tracer("agent").Start(ctx, "agent: charge the order")
	cmd := operation.Command{EventID: canaryEvent, Operation: "payment.charge", ApprovalID: "appr-canary-1",
		Payload: json.RawMessage(`{"account_id":"` + canaryAccount + `","order_id":"` + canaryOrder + `","amount_minor":125000,"currency":"rub"}`)}
	key := "test:payment.charge:" + canaryEvent + ":v1"
	pending := 0
	res, err := cl.PublishAndWait(ctx, cmd, key, func(operation.Result) { pending++ })
	require.NoError(t, err)
	agent.End()
	require.Equal(t, operation.ResultSucceeded, res.Status, "%+v", res)
	require.Equal(t, 1, sb.TotalEffects(), "one charge in the target")
	require.GreaterOrEqual(t, pending, 1, "the agent heard the outcome was being settled")
	w.Stop() // every span of the worker ended

	spans := exp.GetSpans()
	for _, s := range spans {
		t.Logf("%s %s parent=%s trace=%s attrs=%v links=%d", s.SpanContext.SpanID(), s.Name, s.Parent.SpanID(), s.SpanContext.TraceID().String()[:6], s.Attributes, len(s.Links))
	}
	traceID := agent.SpanContext().TraceID()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var inTrace []tracetest.SpanStub
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		if s.SpanContext.TraceID() == traceID {
			inTrace = append(inTrace, s)
		}
	}
	named := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range inTrace {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	parentOf := func(s tracetest.SpanStub) tracetest.SpanStub {
		p, ok := byID[s.Parent.SpanID()]
		require.True(t, ok, "%s: parent %s not recorded", s.Name, s.Parent.SpanID())
		return p
	}
	attr := func(s tracetest.SpanStub, k attribute.Key) string {
		for _, kv := range s.Attributes {
			if kv.Key == k {
				return kv.Value.String()
			}
		}
		return ""
	}

	// The agent's publish, then one delivery span per delivery, each the
	// child of the publish across the NATS hop.
	pubs := named("publish " + wire.CommandSubject("payment.charge"))
	require.Len(t, pubs, 1)
	require.Equal(t, agent.SpanContext().SpanID(), pubs[0].Parent.SpanID())
	deliveries := named("process " + wire.CommandSubject("payment.charge"))
	require.GreaterOrEqual(t, len(deliveries), 2, "the first delivery and the one that reconciled")
	for _, d := range deliveries {
		require.Equal(t, trace.SpanKindConsumer, d.SpanKind)
		require.Equal(t, pubs[0].SpanContext.SpanID(), d.Parent.SpanID(), "delivery → producer across NATS")
		require.True(t, d.Parent.IsRemote())
		require.Equal(t, "payment.charge", attr(d, telemetry.AttrOperationType))
	}

	// execute → HTTP POST, whose answer was lost: reconcile_before_retry.
	execs := named("execute")
	require.Len(t, execs, 1)
	require.Equal(t, "process "+wire.CommandSubject("payment.charge"), parentOf(execs[0]).Name)
	require.Equal(t, "execute", attr(parentOf(execs[0]), telemetry.AttrDecision))
	require.Equal(t, string(adapters.ReconcileBeforeRetry), attr(execs[0], telemetry.AttrErrorClass))
	require.Equal(t, "1", attr(execs[0], telemetry.AttrAttempt))
	require.NotEmpty(t, attr(execs[0], telemetry.AttrFencingToken))
	require.Equal(t, "payments", attr(execs[0], telemetry.AttrTargetSystem))

	// reconcile (on a later delivery whose claim decided so) → HTTP GET: found.
	recs := named("reconcile")
	require.Len(t, recs, 1)
	require.Equal(t, "reconcile", attr(parentOf(recs[0]), telemetry.AttrDecision))
	require.Equal(t, string(adapters.Found), attr(recs[0], "idemgate.lookup.status"))

	// The adapters' HTTP calls are the attempts' children.
	var posts, gets int
	for _, s := range inTrace {
		if s.SpanKind != trace.SpanKindClient {
			continue
		}
		switch parent := parentOf(s); {
		case s.Name == "HTTP POST" && parent.Name == "execute":
			posts++
		case s.Name == "HTTP GET" && parent.Name == "reconcile":
			gets++
		default:
			t.Errorf("client span %s under %s", s.Name, parent.Name)
		}
	}
	require.Equal(t, 1, posts, "one create call")
	require.GreaterOrEqual(t, gets, 1, "the lookup")

	// Results: published under the deliveries, pending then succeeded; the
	// result message carries the trace on to whoever reads it.
	resSubject := wire.ResultSubject("payment.charge")
	results := named("publish " + resSubject)
	statuses := map[string]bool{}
	var last tracetest.SpanStub
	for _, r := range results {
		require.Equal(t, trace.SpanKindProducer, r.SpanKind)
		require.Contains(t, parentOf(r).Name, "process ")
		statuses[attr(r, telemetry.AttrStatus)] = true
		if attr(r, telemetry.AttrStatus) == string(operation.ResultSucceeded) {
			last = r
		}
	}
	require.True(t, statuses["pending"] && statuses["succeeded"], "%v", statuses)
	stream, err := js.Stream(context.Background(), ncfg.ResultsStream)
	require.NoError(t, err)
	msg, err := stream.GetLastMsgForSubject(context.Background(), resSubject)
	require.NoError(t, err)
	require.Equal(t, "00-"+traceID.String()+"-"+last.SpanContext.SpanID().String()+"-01", msg.Header.Get("traceparent"),
		"the succeeded result's headers carry its publish span")

	// Claim batches are spans of their own, linked to the deliveries.
	linked := map[trace.SpanID]bool{}
	for _, s := range spans {
		if s.Name == "claim" {
			for _, l := range s.Links {
				linked[l.SpanContext.SpanID()] = true
			}
		}
	}
	for _, d := range deliveries {
		require.True(t, linked[d.SpanContext.SpanID()], "delivery %s linked from its claim batch", d.SpanContext.SpanID())
	}

	// Each attempt of the trail names the trace (idemgate trace KEY).
	atts, err := st.Attempts(context.Background(), key)
	require.NoError(t, err)
	require.Len(t, atts, 2, "the execute attempt and the reconcile")
	ids, err := st.(journal.AttemptTraces).AttemptTraceIDs(context.Background(), key)
	require.NoError(t, err)
	for _, a := range atts {
		require.Equal(t, traceID.String(), ids[a.Token], "attempt %d (%s)", a.Attempt, a.Kind)
	}

	// The attempt's and the lookup's logs name the trace.
	require.Contains(t, logs.String(), `"trace_id":"`+traceID.String()+`"`)
	require.Regexp(t, `"msg":"outcome unknown[^\n]*"trace_id":"`+traceID.String(), logs.String())
	require.Regexp(t, `"msg":"reconciled: found by key"[^\n]*"trace_id":"`+traceID.String(), logs.String())

	// The latency histograms carry the trace id as exemplar.
	families, err := reg.Gather()
	require.NoError(t, err)
	exemplars := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, bk := range m.GetHistogram().GetBucket() {
				for _, l := range bk.GetExemplar().GetLabel() {
					if l.GetName() == "trace_id" && l.GetValue() == traceID.String() {
						exemplars[f.GetName()] = true
					}
				}
			}
		}
	}
	require.True(t, exemplars["idemgate_command_duration_seconds"] && exemplars["idemgate_adapter_call_duration_seconds"], "%v", exemplars)

	// Canary: no span carries the key's intent part, a payload value or the
	// target's credentials, in its name, attributes, events, links or status.
	for _, s := range spans {
		texts := []string{s.Name, s.Status.Description}
		for _, kv := range s.Attributes {
			texts = append(texts, string(kv.Key)+"="+kv.Value.String())
		}
		for _, e := range s.Events {
			texts = append(texts, e.Name)
			for _, kv := range e.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, l := range s.Links {
			for _, kv := range l.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		all := strings.Join(texts, "\n")
		for _, canary := range []string{canaryEvent, canaryAccount, canaryOrder, "appr-canary-1", secret, shop + ":"} {
			require.NotContains(t, all, canary, "span %q", s.Name)
		}
	}
}
