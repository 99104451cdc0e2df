package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/redact"
	"github.com/idemgate/idemgate/sandbox"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
	"github.com/idemgate/idemgate/wire"
)

const (
	dashboardFile = "../../deploy/grafana/idemgate.json"
	alertsFile    = "../../deploy/prometheus/alerts.yaml"
)

// promQuery is one PromQL expression and where it comes from.
type promQuery struct{ where, expr string }

// dashboardQueries parses the Grafana dashboard and returns its queries.
func dashboardQueries(t *testing.T) []promQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	type panel struct {
		Title   string  `json:"title"`
		Type    string  `json:"type"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d), "the dashboard is valid JSON")
	require.NotEmpty(t, d.UID)
	var out []promQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			for _, tg := range p.Targets {
				require.NotEmpty(t, tg.Expr, "panel %q query %s is empty", p.Title, tg.RefID)
				out = append(out, promQuery{where: fmt.Sprintf("dashboard panel %q query %s", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return out
}

// alertQueries parses the alerting rules and returns their expressions.
func alertQueries(t *testing.T) []promQuery {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &f))
	var out []promQuery
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, promQuery{where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	return out
}

var (
	reString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reMatchers = regexp.MustCompile(`\{([^}]*)\}`)
	reMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	reGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	reRange    = regexp.MustCompile(`\[[^\]]*\]`)
	reVariable = regexp.MustCompile(`\$\{?[a-zA-Z_]+\}?`)
	reToken    = regexp.MustCompile(`\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
)

var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}

// metricsAndLabels returns the metric names and the label names a PromQL
// expression uses. It is a small scanner, enough for the expressions kept
// in deploy/ (the test fails on what it cannot read: an unknown metric).
func metricsAndLabels(expr string) (metrics, labels []string) {
	for _, m := range reMatchers.FindAllStringSubmatch(expr, -1) {
		for _, l := range reMatcher.FindAllStringSubmatch(reString.ReplaceAllString(m[1], `""`), -1) {
			labels = append(labels, l[1])
		}
	}
	e := reString.ReplaceAllString(expr, `""`)
	e = reMatchers.ReplaceAllString(e, " ")
	for _, g := range reGrouping.FindAllStringSubmatch(e, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	e = reGrouping.ReplaceAllString(e, " ")
	e = reRange.ReplaceAllString(e, " ")
	e = reVariable.ReplaceAllString(e, " ")
	for _, tok := range reToken.FindAllStringSubmatch(e, -1) {
		name := strings.TrimSpace(strings.TrimSuffix(tok[0], "("))
		switch {
		case tok[1] != "": // a function call
		case name[0] >= '0' && name[0] <= '9':
		case promKeywords[strings.ToLower(name)]:
		default:
			metrics = append(metrics, name)
		}
	}
	return metrics, labels
}

func TestMetricsAndLabelsScanner(t *testing.T) {
	m, l := metricsAndLabels(`sum by (decision) (rate(a_total{x="1",y=~"b|c"}[5m])) / clamp_min(sum(rate(b_total[$__rate_interval])), 1e-9) > 0.01 and on (z) c`)
	require.Equal(t, []string{"a_total", "b_total", "c"}, m)
	require.Equal(t, []string{"x", "y", "decision", "z"}, l)
	m, l = metricsAndLabels(`histogram_quantile(0.95, sum by (le, operation) (rate(h_bucket[5m]))) or vector(0)`)
	require.Equal(t, []string{"h_bucket"}, m)
	require.Equal(t, []string{"le", "operation"}, l)
}

// exported maps each series name a scrape shows (histograms as their
// _bucket, _sum and _count series) to the label names its samples carry.
func exported(families map[string]*dto.MetricFamily) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, lp := range m.GetLabel() {
			out[name][lp.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}

// Series Prometheus makes itself, and the labels it adds to every scraped
// series.
var (
	prometheusSeries = map[string]bool{"up": true}
	targetLabels     = map[string]bool{"job": true, "instance": true}
)

// TestDashboardAndAlertsNameExportedMetrics runs a daemon, sends it real
// traffic (a charge, a duplicate, a conflict, a rejected command, a lost
// response reconciled, a webhook with a bad signature), scrapes its
// /metrics, and checks that every query of the Grafana dashboard and of
// the alerting rules names only metrics (and labels) the daemon exports.
// A metric renamed or removed in the code fails here, naming the panel or
// the alert to update.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	t.Parallel()
	queries := append(dashboardQueries(t), alertQueries(t)...)
	require.NotEmpty(t, queries)

	sb := sbyookassa.New(sbyookassa.Options{})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	shop, secret := sb.Credentials()

	ing, err := loadConfig(flagsWith(t, "--config", writeConfig(t, fmt.Sprintf(`
env: test
ingest:
  enabled: true
  addr: %q
  sources:
    - name: payments
      scheme: stripe
      secrets: ["whsec_dashboard_test"]
      routes:
        - event: payment_intent.succeeded
          operation: crm.task.create
          intent_paths: [data.object.id]
          payload:
            - {field: title, value: "Call the customer"}
            - {field: responsible_id, value: "7"}
`, "127.0.0.1:0"))))
	require.NoError(t, err)
	c := testDaemonConfig(t)
	c.Ingest = ing.Ingest
	c.Routes = map[string]string{"payment.charge": "yookassa"}
	c.Adapters.YooKassa = &yookassa.Config{BaseURL: url, ShopID: shop, SecretKey: adapters.SecretKey{Value: redact.Secret(secret)}}
	c.Worker.CallTimeout = 2 * time.Second
	c.Reconciler.Interval = 200 * time.Millisecond
	logs := &lockedWriter{w: &bytes.Buffer{}}
	d := startDaemon(t, c, logs)

	nc, err := nats.Connect("nats://" + d.natsAddr)
	require.NoError(t, err)
	defer nc.Close()
	cl, err := producer.New(nc, "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	charge := func(event, account string) (operation.Result, string) {
		cmd := operation.Command{EventID: event, Operation: "payment.charge", ApprovalID: "appr-" + event,
			Payload: json.RawMessage(`{"account_id":"` + account + `","order_id":"order-` + event + `","amount_minor":1000,"currency":"rub"}`)}
		key := "test:payment.charge:" + event + ":v1"
		r, err := cl.PublishAndWait(ctx, cmd, key, nil)
		require.NoError(t, err)
		return r, key
	}
	first, _ := charge("evt-dash-1", "acct-1")
	require.Equal(t, operation.ResultSucceeded, first.Status, "%+v", first)
	again, _ := charge("evt-dash-1", "acct-1") // a JetStream duplicate: replayed
	require.Equal(t, first.TargetObjectID, again.TargetObjectID)
	retry := operation.Command{EventID: "evt-dash-1b", IntentID: "evt-dash-1", Operation: "payment.charge", ApprovalID: "appr-evt-dash-1",
		Payload: json.RawMessage(`{"account_id":"acct-1","order_id":"order-evt-dash-1","amount_minor":1000,"currency":"rub"}`)}
	replayed, err := cl.PublishAndWait(ctx, retry, "test:payment.charge:evt-dash-1:v1", nil)
	require.NoError(t, err)
	require.True(t, replayed.Replayed)
	conflict := retry
	conflict.EventID, conflict.Payload = "evt-dash-1c", json.RawMessage(`{"account_id":"acct-1","order_id":"order-evt-dash-1","amount_minor":2000,"currency":"rub"}`)
	conflicted, err := cl.PublishAndWait(ctx, conflict, "test:payment.charge:evt-dash-1:v1", nil)
	require.NoError(t, err)
	require.Equal(t, operation.ResultConflict, conflicted.Status, "%+v", conflicted)
	// A command that is not JSON: rejected and terminated.
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.Publish(ctx, wire.CommandSubject("payment.charge"), []byte("not json"), jetstream.WithMsgID("evt-dash-bad"))
	require.NoError(t, err)
	// A lost response: unknown, then reconciled (found).
	require.NoError(t, sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Count: 1}))
	lost, _ := charge("evt-dash-2", "acct-2")
	require.Equal(t, operation.ResultSucceeded, lost.Status, "%+v", lost)
	require.Equal(t, 2, sb.TotalEffects(), "two charges in the target")
	// A webhook with a bad signature.
	req, err := http.NewRequest(http.MethodPost, "http://"+d.ingest.Addr()+"/webhooks/payments", strings.NewReader(`{"id":"evt_x"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", "t=1,v1=00")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	var series map[string]map[string]bool
	require.Eventually(t, func() bool {
		resp, err := httpClient.Get("http://" + d.adminAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		families, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Logf("scrape: %v", err)
			return false
		}
		series = exported(families)
		return series["idemgate_reconcile_lookups_total"] != nil && series["idemgate_commands_rejected_total"] != nil &&
			counterAbove(families, "idemgate_commands_rejected_total", 0)
	}, 30*time.Second, 100*time.Millisecond, "the traffic shows in /metrics")

	var names []string
	for n := range series {
		if strings.HasPrefix(n, "idemgate_") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, q := range queries {
		metrics, labels := metricsAndLabels(q.expr)
		require.NotEmpty(t, metrics, "%s: no metric found in %q", q.where, q.expr)
		known := map[string]bool{}
		for _, m := range metrics {
			if prometheusSeries[m] {
				known["job"], known["instance"] = true, true
				continue
			}
			ls, ok := series[m]
			if !ok {
				t.Errorf("%s names %s, which the daemon does not export (renamed or removed? update deploy/ to one of: %s)",
					q.where, m, strings.Join(names, " "))
				continue
			}
			for l := range ls {
				known[l] = true
			}
		}
		for _, l := range labels {
			if !known[l] && !targetLabels[l] {
				t.Errorf("%s uses label %q, which none of %v carries", q.where, l, metrics)
			}
		}
	}
	require.Contains(t, logs.String(), `"operation_key"`, "the daemon's logs were captured")
	require.NotContains(t, logs.String(), "acct-1", "payloads are never logged")
}

func counterAbove(families map[string]*dto.MetricFamily, name string, v float64) bool {
	f := families[name]
	return f != nil && slices.ContainsFunc(f.GetMetric(), func(m *dto.Metric) bool { return m.GetCounter().GetValue() > v })
}
