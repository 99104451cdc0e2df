package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/bitrix24"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
	sbbitrix "github.com/idemgate/idemgate/sandbox/bitrix24"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

// A portal already holding two tasks for a key (two owners both created,
// or a dead owner's add landed late) gets no third: the operation keeps the
// oldest, and the others are reported everywhere an operator looks — the
// stored and published result ("duplicates", "duplicate_object_ids", shown
// by idemgate trace), an error log, and
// idemgate_duplicates_detected_total{target}.
func TestDuplicatesInTheTargetAreReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	portal := sbbitrix.New(sbbitrix.Options{})
	_, err := portal.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = portal.Close() })
	uid, code := portal.Credentials()
	a, err := bitrix24.New(bitrix24.Config{PortalURL: portal.URL(), UserID: uid, WebhookCode: adapters.WebhookCode{Value: redact.Secret(code)},
		HTTPConfig: adapters.HTTPConfig{Timeout: 2 * time.Second, RateLimit: adapters.RateLimit{Rate: -1}}})
	require.NoError(t, err)

	const key = "test:crm.task.create:evt-dup:v1"
	var ids []float64
	for range 2 {
		body := `{"fields":{"SUBJECT":"Call back","RESPONSIBLE_ID":"7","TYPE_ID":"3","ORIGINATOR_ID":"idemgate","ORIGIN_ID":"` + key + `"}}`
		resp, err := http.Post(portal.WebhookURL()+"/crm.activity.add.json", "application/json", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		var r struct{ Result float64 }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		_ = resp.Body.Close()
		ids = append(ids, r.Result)
	}
	require.Equal(t, 2, portal.Effects(key))

	reg := prometheus.NewRegistry()
	var logs lockedBuffer
	cons, err := consumer.Ensure(context.Background(), b.js, b.ncfg)
	require.NoError(t, err)
	w, err := worker.New(worker.Config{Owner: "w1", LeaseTTL: 3 * time.Second, CallTimeout: 2 * time.Second,
		Retry: worker.RetryPolicy{InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxElapsed: 2 * time.Second, InLease: time.Second}},
		b.ncfg, worker.Deps{
			Store: b.store, JS: b.js, NC: b.nc, Consumer: cons, Decoder: &operation.Decoder{Env: "test"},
			Adapters: map[string]adapters.Adapter{"crm.task.create": a},
			Metrics:  worker.NewMetrics(reg),
			Log:      slog.New(slog.NewJSONHandler(&logs, nil)),
		})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)

	_, err = b.js.Publish(context.Background(), wire.CommandSubject("crm.task.create"),
		[]byte(`{"event_id":"evt-dup","operation":"crm.task.create","payload":{"title":"Call back","responsible_id":"7"}}`))
	require.NoError(t, err)
	res := b.await(t, key, 1)[0]
	require.Equal(t, operation.ResultSucceeded, res.Status)
	oldest, other := formatID(ids[0]), formatID(ids[1])
	require.Equal(t, oldest, res.TargetObjectID, "the oldest task is the operation's")
	var result map[string]any
	require.NoError(t, json.Unmarshal(res.Result, &result))
	require.EqualValues(t, 1, result["duplicates"])
	require.Equal(t, []any{other}, result["duplicate_object_ids"])
	require.Equal(t, 2, portal.Effects(key), "no third task")

	rec, err := b.store.Get(context.Background(), key)
	require.NoError(t, err)
	require.JSONEq(t, string(res.Result), string(rec.Result), "the stored result carries them too")

	require.Equal(t, 1.0, counter(t, reg, "idemgate_duplicates_detected_total", "target", "bitrix24"))
	require.Contains(t, logs.String(), `"level":"ERROR"`)
	require.Contains(t, logs.String(), `"duplicate_object_ids":["`+other+`"]`)
	require.Contains(t, logs.String(), `"operation_key":"`+key+`"`)
}

func formatID(f float64) string {
	b, _ := json.Marshal(int64(f))
	return string(b)
}
