package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/sandbox"
)

// Horizons of the daemons under test: short so the suite is fast, and valid
// (call_timeout < lease_ttl; lease_ttl + heartbeat_interval < ack_wait;
// retry.in_lease + call_timeout < ack_wait), with slack for a loaded
// 2-core machine running race-instrumented replicas.
const (
	leaseTTL          = 4 * time.Second
	callTimeout       = 2500 * time.Millisecond
	heartbeatInterval = time.Second
	ackWait           = 6 * time.Second
	retryInLease      = 3 * time.Second
	reconcileInterval = 500 * time.Millisecond
	// slowCreate holds the first create of check 8 in the target, well
	// inside callTimeout (T-Bank makes a second request after it, and a
	// loaded machine slows both), so that the twin command meets a live lease.
	slowCreate = 1200 * time.Millisecond
	// lateLanding holds a dead owner's create in the target until another
	// replica has taken over (lease), found nothing and executed again
	// (redelivery after ack_wait).
	lateLanding = 12 * time.Second
)

// targetSandbox is a started emulator and how a daemon reaches it.
type targetSandbox struct {
	core *sandbox.Core
	// requests counts the create requests the target received.
	requests *requestLog
	// adapterYAML is the adapter's section under `adapters:` (indented two
	// spaces), without credentials.
	adapterYAML string
	// env carries the credentials, as in production (never in the file).
	env []string
	// secrets must appear in no daemon output.
	secrets []string
	// configYAML is further top-level configuration the target needs
	// (operations: for a declared type), or "".
	configYAML string
}

// target is one row of the table: an operation routed to a sandbox.
type target struct {
	name      string // subtest name
	operation string
	adapter   string // route: the adapter instance name
	approval  bool   // money-moving: the command carries approval_id
	start     func(t *testing.T) targetSandbox
	// payload is the command's payload for an intent; changed alters a
	// significant field (the amount, or the task's title).
	payload func(intent string, changed bool) json.RawMessage
	// payloadCanaries are payload values no daemon may log.
	payloadCanaries []string
}

// cluster is one target's world: a JetStream server, a journal schema, the
// sandbox, and daemon replicas sharing them.
type cluster struct {
	t      *testing.T
	tgt    target
	sb     targetSandbox
	ns     *natstest.Server
	nc     *nats.Conn
	client *producer.Client
	dsn    string
	store  *postgres.Store
	dir    string

	mu      sync.Mutex
	daemons []*daemon
}

func newCluster(t *testing.T, tgt target) *cluster {
	t.Helper()
	c := &cluster{t: t, tgt: tgt, dir: t.TempDir()}
	c.dsn = pgtest.Schema(t)
	c.embeddedNATS()
	c.sb = tgt.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.openStore(ctx)
	return c
}

// embeddedNATS gives the cluster an embedded JetStream server and a
// producer connected to it.
func (c *cluster) embeddedNATS() {
	c.t.Helper()
	c.ns = natstest.Start(c.t)
	c.nc, _ = c.ns.Connect(c.t)
	var err error
	c.client, err = producer.New(c.nc, "")
	require.NoError(c.t, err)
}

// openStore opens the test's own view of the journal at c.dsn (where the
// daemons migrate it, after they did).
func (c *cluster) openStore(ctx context.Context) {
	c.t.Helper()
	st, err := postgres.Open(ctx, c.dsn, postgres.Config{})
	require.NoError(c.t, err)
	c.store = st
	c.t.Cleanup(st.Close)
}

// horizons are a daemon's timings.
type horizons struct {
	ackWait, leaseTTL, callTimeout, heartbeat, inLease time.Duration
}

var defaultHorizons = horizons{ackWait, leaseTTL, callTimeout, heartbeatInterval, retryInLease}

// daemonConfig is what the configuration files of the tests differ in.
type daemonConfig struct {
	natsURL      string // one server or a comma-separated list
	natsReplicas int    // the streams' replicas; 0 leaves the default
	replicas     int    // daemon replicas sharing the journal
	dsn          string
	maxInFlight  int    // 0 leaves the default
	maxDeliver   int    // nats.max_deliver; 0 leaves the default
	extra        string // further top-level configuration (YAML)
	h            horizons
}

// configFile writes a daemon (or tool) configuration for owner on the
// cluster's embedded NATS and journal and returns its path. One command is
// in flight per replica: a twin command sent at once must go to the other
// replica while the first is being executed (check 8).
func (c *cluster) configFile(owner string) string {
	return c.writeConfig(owner, daemonConfig{natsURL: c.ns.URL(), replicas: 2, dsn: c.dsn, maxInFlight: 1,
		extra: c.sb.configYAML, h: defaultHorizons})
}

// writeConfig writes owner's configuration file and returns its path.
func (c *cluster) writeConfig(owner string, dc daemonConfig) string {
	c.t.Helper()
	dataDir := filepath.Join(c.dir, owner)
	require.NoError(c.t, os.MkdirAll(dataDir, 0o700))
	var natsReplicas, maxInFlight string
	if dc.natsReplicas > 0 {
		natsReplicas = fmt.Sprintf("\n  replicas: %d", dc.natsReplicas)
	}
	if dc.maxDeliver > 0 {
		natsReplicas += fmt.Sprintf("\n  max_deliver: %d", dc.maxDeliver)
	}
	if dc.maxInFlight > 0 {
		maxInFlight = fmt.Sprintf("\n  max_in_flight: %d", dc.maxInFlight)
	}
	yaml := fmt.Sprintf(`env: test
data_dir: %q
replicas: %d
log:
  level: info
  format: json
admin:
  addr: 127.0.0.1:0
nats:
  url: %q%s
  ack_wait: %s
  fetch_wait: 100ms
journal:
  url: %q
worker:
  owner: %q
  lease_ttl: %s
  call_timeout: %s
  heartbeat_interval: %s%s
  shutdown_timeout: 2s
  retry:
    in_lease: %s
reconciler:
  interval: %s
# The guarantees under faults, not a person's approval (worker and cmd tests
# hold those): charges execute at once.
approvals:
  enabled: false
routes:
  %s: %s
adapters:
%s%s`, dataDir, dc.replicas, dc.natsURL, natsReplicas, dc.h.ackWait, dc.dsn, owner, dc.h.leaseTTL, dc.h.callTimeout,
		dc.h.heartbeat, maxInFlight, dc.h.inLease, reconcileInterval, c.tgt.operation, c.tgt.adapter, c.sb.adapterYAML, dc.extra)
	p := filepath.Join(c.dir, owner+".yaml")
	require.NoError(c.t, os.WriteFile(p, []byte(yaml), 0o600))
	return p
}

func (c *cluster) env() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.dir, "TMPDIR=" + os.TempDir()}
	return append(env, c.sb.env...)
}

// daemon is one `idemgate run` subprocess.
type daemon struct {
	name      string
	cmd       *exec.Cmd
	out       *syncBuffer
	exited    chan struct{}
	killed    bool
	adminAddr string
}

// startDaemons starts replicas named <prefix>-a, <prefix>-b… at once on
// configFile's configuration and waits until each runs.
func (c *cluster) startDaemons(names ...string) []*daemon {
	c.t.Helper()
	return c.startFleet(names, c.configFile)
}

// startFleet starts one replica per name at once, each on the configuration
// file config writes for it, and waits until each runs.
func (c *cluster) startFleet(names []string, config func(owner string) string) []*daemon {
	c.t.Helper()
	ds := make([]*daemon, len(names))
	for i, n := range names {
		ds[i] = c.spawnWith(n, config(n))
	}
	for _, d := range ds {
		c.waitRunning(d)
	}
	return ds
}

// spawnWith starts `idemgate run` on the configuration file cfg; stopped
// (and its output checked) when the test ends.
func (c *cluster) spawnWith(name, cfg string) *daemon {
	c.t.Helper()
	d := &daemon{name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(binary, "run", "--config", cfg)
	d.cmd.Env = c.env()
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	require.NoError(c.t, d.cmd.Start(), "start %s", name)
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	c.mu.Lock()
	c.daemons = append(c.daemons, d)
	c.mu.Unlock()
	t, sb, tgt := c.t, c.sb, c.tgt
	t.Cleanup(func() { stopDaemon(t, sb, tgt, d) })
	return d
}

// stopDaemon kills d if it still runs, then checks its output: no data race,
// no credential, no payload content. On failure the output is dumped.
func stopDaemon(t *testing.T, sb targetSandbox, tgt target, d *daemon) {
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	out := d.out.String()
	if strings.Contains(out, "WARNING: DATA RACE") {
		t.Errorf("daemon %s: data race (output below)", d.name)
	}
	for _, s := range sb.secrets {
		if strings.Contains(out, s) {
			t.Errorf("daemon %s: a credential appears in its output", d.name)
		}
	}
	for _, s := range tgt.payloadCanaries {
		if strings.Contains(out, s) {
			t.Errorf("daemon %s: payload content %q appears in its output", d.name, s)
		}
	}
	if t.Failed() {
		const max = 48 << 10
		if len(out) > max {
			out = "…" + out[len(out)-max:]
		}
		t.Logf("---- daemon %s output ----\n%s---- end of %s ----", d.name, out, d.name)
	}
}

// waitRunning waits for the daemon's "idemgate running" log line and reads
// its admin address.
func (c *cluster) waitRunning(d *daemon) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, line := range d.out.Lines() {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			if l.Msg == "admin endpoints" {
				d.adminAddr = l.Addr
			}
			if l.Msg == "idemgate running" {
				require.NotEmpty(c.t, d.adminAddr, "daemon %s: no admin address logged", d.name)
				return
			}
		}
		select {
		case <-d.exited:
			c.t.Fatalf("daemon %s exited before running (%v):\n%s", d.name, d.cmd.ProcessState, d.out.String())
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("daemon %s did not start in time:\n%s", d.name, d.out.String())
		}
	}
}

// kill sends SIGKILL: no drain, no deferred code, leases left as they are.
func (c *cluster) kill(d *daemon) {
	c.t.Helper()
	require.NoError(c.t, d.cmd.Process.Signal(syscall.SIGKILL))
	<-d.exited
	d.killed = true
}

// tool runs a one-shot idemgate command (trace, reconcile…) with a
// configuration of its own and returns its standard output.
func (c *cluster) tool(owner string, args ...string) (string, error) {
	c.t.Helper()
	cfg := c.configFile(owner)
	cmd := exec.Command(binary, append(args, "--config", cfg)...)
	cmd.Env = c.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	require.NoError(c.t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return stdout.String(), fmt.Errorf("idemgate %s: %w\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
		}
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return stdout.String(), fmt.Errorf("idemgate %s: timed out", strings.Join(args, " "))
	}
	for _, s := range c.sb.secrets {
		if strings.Contains(stdout.String()+stderr.String(), s) {
			c.t.Errorf("idemgate %s: a credential appears in its output", args[0])
		}
	}
	return stdout.String(), nil
}

// traceJSON runs `idemgate trace KEY --json`.
func (c *cluster) traceJSON(key string) (journal.Record, []journal.Attempt) {
	c.t.Helper()
	out, err := c.tool("e2e-trace", "trace", key, "--json")
	require.NoError(c.t, err)
	rec, atts, err := decodeTrace([]byte(out))
	require.NoError(c.t, err, out)
	return rec, atts
}

// command builds the command of an intent.
func (c *cluster) command(eventID, intent string, changed bool) operation.Command {
	cmd := operation.Command{EventID: eventID, Operation: c.tgt.operation, IntentID: intent,
		Payload: c.tgt.payload(intent, changed)}
	if c.tgt.approval {
		cmd.ApprovalID = "appr-" + intent
	}
	return cmd
}

// key is the operation key the daemons derive for an intent.
func (c *cluster) key(intent string) string {
	return "test:" + c.tgt.operation + ":" + intent + ":v1"
}

// send publishes cmd and waits for its final result.
func (c *cluster) send(cmd operation.Command) operation.Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	r, err := c.client.PublishAndWait(ctx, cmd, c.key(cmd.IntentID), nil)
	require.NoError(c.t, err)
	return r
}

// sendAsync publishes cmd now and delivers its final result later.
func (c *cluster) sendAsync(cmd operation.Command) <-chan asyncResult {
	ch := make(chan asyncResult, 1)
	sawPending := make(chan struct{})
	var once sync.Once
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := c.client.PublishAndWait(ctx, cmd, c.key(cmd.IntentID), func(operation.Result) {
			once.Do(func() { close(sawPending) })
		})
		select {
		case <-sawPending:
			ch <- asyncResult{r, err, true}
		default:
			ch <- asyncResult{r, err, false}
		}
	}()
	return ch
}

type asyncResult struct {
	res        operation.Result
	err        error
	sawPending bool
}

// await reads an async result.
func (c *cluster) await(ch <-chan asyncResult) asyncResult {
	c.t.Helper()
	select {
	case r := <-ch:
		require.NoError(c.t, r.err)
		return r
	case <-time.After(90 * time.Second):
		c.t.Fatal("no result in time")
		return asyncResult{}
	}
}

// effects returns the sandbox's real effects for a key.
func (c *cluster) effects(key string) []sandbox.Effect {
	var out []sandbox.Effect
	for _, e := range c.sb.core.Ledger().Effects() {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// row reads the journal row and its attempts trail.
func (c *cluster) row(key string) (journal.Record, []journal.Attempt) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := c.store.Get(ctx, key)
	require.NoError(c.t, err)
	atts, err := c.store.Attempts(ctx, key)
	require.NoError(c.t, err)
	return rec, atts
}

// rowIf is row for polling: ok false while the key is not in the journal.
func (c *cluster) rowIf(key string) (journal.Record, []journal.Attempt, bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := c.store.Get(ctx, key)
	if errors.Is(err, journal.ErrNotFound) {
		return rec, nil, false
	}
	require.NoError(c.t, err)
	atts, err := c.store.Attempts(ctx, key)
	require.NoError(c.t, err)
	return rec, atts, true
}

// waitFor polls cond until it holds or the timeout passes; state describes
// what was last seen, for the failure message.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, state)
		}
		<-tick.C
	}
}

// metric reads one series (name{labels}) from a daemon's /metrics; absent
// series read as 0.
func (d *daemon) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := httpClient.Get("http://" + d.adminAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// executeAttempts and reconcileAttempts filter a trail by kind.
func attemptsOf(atts []journal.Attempt, kind journal.AttemptKind) []journal.Attempt {
	var out []journal.Attempt
	for _, a := range atts {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	return out
}

func describe(rec journal.Record, atts []journal.Attempt) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s object=%q token=%d owner=%s rounds=%d attempts=[", rec.Status, rec.TargetObjectID,
		rec.LeaseToken, rec.LeaseOwner, rec.ReconcileRounds)
	for _, a := range atts {
		fmt.Fprintf(&b, " %d:%s/%s/tok%d/%s/%s", a.Attempt, a.Kind, a.Worker, a.Token, a.Outcome, a.ErrorCode)
	}
	b.WriteString(" ]")
	return b.String()
}

// syncBuffer collects a subprocess's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the complete lines written so far.
func (s *syncBuffer) Lines() []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
