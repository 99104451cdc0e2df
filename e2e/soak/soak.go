package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// soak is one run.
type soak struct {
	cfg    config
	stdout io.Writer
	rng    *mrand.Rand

	pg        *postgres
	nats      *proc
	natsAddr  string
	sbCmd     *exec.Cmd
	sb        sandboxInfo
	replicas  []*proc
	adminAddr []string
	nc        *nats.Conn
	js        jetstream.JetStream
	wl        *workload
	nem       *nemesis
	logMu     sync.Mutex
	runLog    *os.File
}

// RunInfo describes the run in the report.
type RunInfo struct {
	Seed       uint64   `json:"seed"`
	Rate       float64  `json:"rate"`
	Duration   string   `json:"duration"`
	Nemesis    []string `json:"nemesis"`
	Break      string   `json:"break,omitempty"`
	Replicas   int      `json:"replicas"`
	Horizons   string   `json:"horizons"`
	Elapsed    string   `json:"elapsed"`
	Settled    string   `json:"settled_in"`
	SettleOK   bool     `json:"settled"`
	Restarts   []string `json:"replica_starts"`
	Unexpected int      `json:"unexpected_exits"`
	PubRetries int64    `json:"publish_retries"`
	OverBudget bool     `json:"over_budget,omitempty"`
	Out        string   `json:"out"`
}

func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintln(s.stdout, line)
	if s.runLog != nil {
		fmt.Fprintln(s.runLog, line)
	}
}

func (s *soak) bin(name string) string { return filepath.Join(s.cfg.binDir, name) }

func (s *soak) run(ctx context.Context) (Report, error) {
	var err error
	s.runLog, err = os.Create(filepath.Join(s.cfg.out, "logs", "soak.log"))
	if err != nil {
		return Report{}, err
	}
	if err := s.setup(ctx); err != nil {
		return Report{}, err
	}
	kinds := map[string]bool{}
	for _, k := range strings.Split(s.cfg.nemesis, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds[k] = true
		}
	}
	s.nem = &nemesis{s: s, kinds: kinds, rng: mrand.New(mrand.NewPCG(s.cfg.seed+7, s.cfg.seed)), gap: s.cfg.gap,
		fault: s.cfg.faultFor, busy: map[int]bool{}}
	for _, k := range []string{NemKill, NemCrash, NemPause, NemPG, NemNATS} {
		if !kinds[k] {
			continue
		}
		if k == NemCrash {
			for _, p := range crashpoint.Points {
				if s.cfg.breakName == "ack_before_publish" && p != crashpoint.BeforePublish {
					continue
				}
				s.nem.actions = append(s.nem.actions, NemCrash+":"+string(p))
			}
			continue
		}
		s.nem.actions = append(s.nem.actions, k)
	}
	if kinds[NemFaults] {
		s.nem.faults = faultSets(s.cfg.knownDefects)
		switch s.cfg.breakName {
		case "blind_retry":
			s.nem.faults = []faultSet{{"fault:lost_responses", map[string][]map[string]any{
				"onec": {{"kind": "lose_response_close", "rate": 0.2}}, "yookassa": {{"kind": "reset_after_commit", "rate": 0.2}}}}}
		case "no_fencing":
			// Slow calls are in flight when a replica is paused; slow
			// lookups keep the new owner's reconcile attempts open when the
			// stale owner wakes up and completes.
			slow := []map[string]any{{"kind": "delay", "delay_ms": 3500, "rate": 0.9, "scope": "read"},
				{"kind": "delay", "delay_ms": 3000, "rate": 0.5, "scope": "create"}}
			s.nem.faults = []faultSet{{"fault:slow_calls", map[string][]map[string]any{"onec": slow, "yookassa": slow, "bitrix24": slow}}}
		}
	}
	s.logf("soak: %d replicas, %.0f commands/s for %v, nemesis %v, seed %d, out %s", s.cfg.replicas, s.cfg.rate, s.cfg.duration,
		append(s.nem.actions, faultNames(s.nem.faults)...), s.cfg.seed, s.cfg.out)

	// Workload and nemesis.
	s.wl = newWorkload(s.js, "soak", "cnry"+randHex(6), s.cfg.rate, s.cfg.crmRate, s.cfg.seed, s.cfg.keyless)
	if _, err := s.nc.Subscribe(replySubject, s.wl.onReply); err != nil {
		return Report{}, err
	}
	wctx, wcancel := context.WithTimeout(ctx, s.cfg.duration)
	defer wcancel()
	supCtx, supStop := context.WithCancel(ctx)
	var tracks sync.WaitGroup
	tracks.Add(3)
	go func() { defer tracks.Done(); s.nem.processTrack(wctx) }()
	go func() { defer tracks.Done(); s.nem.faultTrack(wctx) }()
	go func() { defer tracks.Done(); s.nem.supervise(supCtx) }()
	start := time.Now()
	progressDone := make(chan struct{})
	go s.progress(wctx, progressDone)
	werr := s.wl.run(wctx, s.cfg.publishers)
	end := time.Now()
	<-progressDone
	if werr != nil {
		supStop()
		tracks.Wait()
		return Report{}, werr
	}
	s.logf("workload done: %d messages in %v; waiting for the nemesis to recover", len(s.wl.sent), end.Sub(start).Round(time.Second))
	// The nemesis finishes its current action (with its recovery).
	supStop()
	tracks.Wait()
	s.clearFaults()
	for i, p := range s.replicas {
		_ = p.signal(syscall.SIGCONT, false)
		if !p.running() {
			s.startReplica(i)
		}
	}

	// Settle.
	settleStart := time.Now()
	settled := s.settle(ctx)
	close(s.wl.giveUp)
	settleTook := time.Since(settleStart).Round(time.Second)
	s.logf("settle: %v after %v", map[bool]string{true: "settled", false: "NOT settled (timeout)"}[settled], settleTook)

	h, err := s.collect(ctx)
	if err != nil {
		return Report{}, err
	}
	h.Start, h.End = start, end
	if err := saveHistory(s.cfg.out, h); err != nil {
		return Report{}, err
	}
	rep := Check(h, s.cfg.knownSet())
	info := &RunInfo{Seed: s.cfg.seed, Rate: s.cfg.rate, Duration: s.cfg.duration.String(), Nemesis: append(s.nem.actions, faultNames(s.nem.faults)...),
		Break: s.cfg.breakName, Replicas: s.cfg.replicas, Settled: settleTook.String(), SettleOK: settled, Out: s.cfg.out,
		Horizons:   fmt.Sprintf("lease_ttl %v, call_timeout 4s, heartbeat 2s, ack_wait 15s, duplicate_window 30s, retry.max_elapsed 8s, reconciler 1s", s.cfg.lease),
		PubRetries: s.wl.retries.Load()}
	for _, p := range s.replicas {
		p.mu.Lock()
		info.Restarts = append(info.Restarts, fmt.Sprintf("%s:%d", p.name, p.starts))
		info.Unexpected += p.unexpected
		p.mu.Unlock()
	}
	rep.Run = info
	if !settled {
		rep.Notes = append(rep.Notes, "the system did not settle within --settle: unsettled rows and lost results below may only be late")
	}
	return rep, nil
}

func faultNames(fs []faultSet) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *soak) progress(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.wl.mu.Lock()
		n, acked := len(s.wl.sent), 0
		for _, x := range s.wl.sent {
			if !x.Acked.IsZero() {
				acked++
			}
		}
		s.wl.mu.Unlock()
		s.logf("progress: %d sent, %d acked by JetStream, %d publishing", n, acked, s.wl.inflight.Load())
		s.scrapeMetrics()
	}
}

// setup starts PostgreSQL, NATS, the emulators and the replicas.
func (s *soak) setup(ctx context.Context) error {
	for _, b := range []string{"idemgate", "nats-server"} {
		if _, err := os.Stat(s.bin(b)); err != nil {
			return fmt.Errorf("%s not found in --bin-dir %q (scripts/soak builds it)", b, s.cfg.binDir)
		}
	}
	var err error
	s.pg, err = newPostgres(filepath.Join(s.cfg.out, "pg"))
	if err != nil {
		return err
	}
	s.logf("postgres: %s", s.pg.url())

	port, err := freePort()
	if err != nil {
		return err
	}
	s.natsAddr = fmt.Sprintf("127.0.0.1:%d", port)
	s.nats = &proc{name: "nats-server", bin: s.bin("nats-server"), log: filepath.Join(s.cfg.out, "logs", "nats.log"),
		args: []string{"-js", "-sd", filepath.Join(s.cfg.out, "nats"), "-a", "127.0.0.1", "-p", fmt.Sprint(port)}}
	if err := s.nats.start(); err != nil {
		return err
	}
	if err := waitTCP(ctx, s.natsAddr, 30*time.Second); err != nil {
		return err
	}
	s.logf("nats: %s", s.natsAddr)

	sbLog, err := os.Create(filepath.Join(s.cfg.out, "logs", "sandbox.log"))
	if err != nil {
		return err
	}
	s.sbCmd = exec.Command(s.bin("idemgate"), "sandbox", "--seed", fmt.Sprint(s.cfg.seed), "--bitrix24-plan", "enterprise")
	s.sbCmd.Stderr = sbLog
	out, err := s.sbCmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.sbCmd.Start(); err != nil {
		return err
	}
	var banner bytes.Buffer
	s.sb, err = readSandbox(io.TeeReader(out, &banner))
	if err != nil {
		return fmt.Errorf("%w\n%s", err, banner.String())
	}
	go func() { _, _ = io.Copy(sbLog, out) }()
	s.logf("sandbox: %v", s.sb.urls)

	s.nc, err = nats.Connect("nats://"+s.natsAddr, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectBufSize(-1))
	if err != nil {
		return err
	}
	s.js, err = jetstream.New(s.nc)
	if err != nil {
		return err
	}
	for i := range s.cfg.replicas {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.adminAddr = append(s.adminAddr, fmt.Sprintf("127.0.0.1:%d", port))
		name := fmt.Sprintf("r%d", i+1)
		cfgPath, err := s.writeConfig(i, name)
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, &proc{name: name, bin: s.bin("idemgate"), args: []string{"run", "--config", cfgPath},
			log: filepath.Join(s.cfg.out, "logs", name+".log")})
	}
	for i := range s.replicas {
		s.startReplica(i)
	}
	// The first replica creates the streams; wait for the consumer.
	deadline := time.Now().Add(90 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.js.Consumer(cctx, "IDEMGATE_COMMANDS", "idemgate-worker")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replicas did not create the durable consumer in time: %w (see %s)", err, filepath.Join(s.cfg.out, "logs"))
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	for _, a := range s.adminAddr {
		if err := waitTCP(ctx, a, 60*time.Second); err != nil {
			return fmt.Errorf("replica admin endpoint: %w", err)
		}
	}
	s.logf("replicas: %d running", len(s.replicas))
	return nil
}

func (s *soak) replicaEnv(i int, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.cfg.out}
	if s.cfg.breakName != "" {
		env = append(env, "IDEMGATE_SOAK_BREAK="+s.cfg.breakName)
	}
	return append(env, extra...)
}

func (s *soak) startReplica(i int) {
	p := s.replicas[i]
	p.env = nil
	if err := p.start(s.replicaEnv(i)...); err != nil {
		s.logf("start %s: %v", p.name, err)
	}
}

// writeConfig writes a replica's configuration: compressed horizons the
// daemon's start-up checks accept (call_timeout < lease_ttl; lease_ttl +
// heartbeat < ack_wait; retry.max_elapsed + call_timeout < ack_wait;
// retention above every redelivery horizon).
func (s *soak) writeConfig(i int, name string) (string, error) {
	dataDir := filepath.Join(s.cfg.out, name)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	yaml := fmt.Sprintf(`env: soak
data_dir: %q
replicas: %d
log:
  level: info
  format: json
admin:
  addr: %s
nats:
  url: nats://%s
  ack_wait: 15s
  duplicate_window: 30s
  max_deliver: 50
  commands_max_age: 1h
  fetch_wait: 200ms
journal:
  url: %q
  retention: 24h
worker:
  owner: %s
  lease_ttl: %s
  call_timeout: 4s
  heartbeat_interval: 2s
  shutdown_timeout: 5s
  retry:
    max_elapsed: 8s
reconciler:
  interval: 1s
routes:
  invoice.create: onec
  payment.charge: yookassa
  payment.refund: yookassa
  crm.task.create: bitrix24
  crm.deal.create: bitrix24
adapters:
%s`, dataDir, s.cfg.replicas, s.adminAddr[i], s.natsAddr, s.pg.url(), name, s.cfg.lease, s.adaptersYAML())
	p := filepath.Join(s.cfg.out, name+".yaml")
	return p, os.WriteFile(p, []byte(yaml), 0o600)
}

// adaptersYAML keeps the emulators the routes use, gives Bitrix24 a settle
// time above the call timeout (a dead owner's late add must land before a
// "not found" is trusted) and each replica its share of the portal's rate
// limit, and YooKassa compressed lookup horizons.
func (s *soak) adaptersYAML() string {
	var b strings.Builder
	keep := false
	for _, line := range strings.Split(s.sb.adapters, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    ") {
			name := strings.TrimSuffix(strings.TrimSpace(line), ":")
			keep = name == "onec" || name == "yookassa" || name == "bitrix24"
			if keep {
				b.WriteString(line + "\n")
				if name == "bitrix24" {
					// Each replica takes its share of the portal's
					// limit (the sandbox runs an Enterprise portal:
					// 250 requests, leaking 5/s).
					b.WriteString("    settle_time: 5s\n")
					fmt.Fprintf(&b, "    rate_limit: {rate: %.3f, burst: %d}\n", 5/float64(s.cfg.replicas), 250/s.cfg.replicas)
				}
				if name == "yookassa" {
					// One machine's clock: the lookup's skew compressed
					// with the other horizons, and one call above the
					// worker's call timeout. The first attempt's window
					// then holds a few hundred payments at 100/s.
					b.WriteString("    timeout: 5s\n    lookup_skew: 2s\n")
				}
			}
			continue
		}
		if keep && line != "" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// settle waits until every command is acknowledged, every journal row is
// final and no publisher is still retrying, or the settle timeout.
func (s *soak) settle(ctx context.Context) bool {
	deadline := time.Now().Add(s.cfg.settle)
	last := time.Time{}
	for time.Now().Before(deadline) {
		unacked, uerr := s.unacked(ctx)
		rows, rerr := s.unsettledRows(ctx)
		inflight := s.wl.inflight.Load()
		if uerr == nil && rerr == nil && unacked == 0 && rows == 0 && inflight == 0 {
			return true
		}
		if time.Since(last) > 10*time.Second {
			s.logf("settling: %d commands unacked (%v), %d rows unsettled (%v), %d publishing", unacked, uerr, rows, rerr, inflight)
			last = time.Now()
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return false
		}
	}
	return false
}

func (s *soak) unacked(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.js.Consumer(cctx, "IDEMGATE_COMMANDS", "idemgate-worker")
	if err != nil {
		return -1, err
	}
	info, err := c.Info(cctx)
	if err != nil {
		return -1, err
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

func (s *soak) unsettledRows(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.pg.url())
	if err != nil {
		return -1, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(cctx, `SELECT count(*) FROM agent_operation_log WHERE status IN ('started','unknown','failed_retryable')`).Scan(&n)
	return n, err
}

func (s *soak) scrapeMetrics() {
	for i, a := range s.adminAddr {
		resp, err := httpClient.Get("http://" + a + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = os.WriteFile(filepath.Join(s.cfg.out, "logs", fmt.Sprintf("metrics-%s.txt", s.replicas[i].name)), b, 0o644)
	}
}

// collect reads the history after settling.
func (s *soak) collect(ctx context.Context) (History, error) {
	h := History{Sent: s.wl.snapshot(), Canary: s.wl.canary, Secrets: s.sb.secrets,
		NativeOnly: map[string]bool{"onec": true, "yookassa": true}, Windows: s.nem.timeline()}
	var err error
	if h.Unacked, err = s.unacked(ctx); err != nil {
		return h, fmt.Errorf("consumer state: %w", err)
	}
	for _, t := range []string{"onec", "yookassa", "bitrix24"} {
		es, err := s.ledger(t)
		if err != nil {
			return h, err
		}
		h.Effects = append(h.Effects, es...)
	}
	var resultsText bytes.Buffer
	if h.Results, err = s.results(ctx, &resultsText); err != nil {
		return h, err
	}
	h.Texts = append(h.Texts, Text{Where: "results stream", Body: resultsText.Bytes()})
	if err := s.journal(ctx, &h); err != nil {
		return h, err
	}
	s.scrapeMetrics()
	for _, p := range s.replicas {
		for _, f := range []string{p.name + ".log", "metrics-" + p.name + ".txt"} {
			b, err := os.ReadFile(filepath.Join(s.cfg.out, "logs", f))
			if err == nil {
				h.Texts = append(h.Texts, Text{Where: f, Body: b})
			}
		}
	}
	return h, nil
}

func (s *soak) ledger(target string) ([]Effect, error) {
	resp, err := httpClient.Get(s.sb.urls[target] + "/_sandbox/ledger")
	if err != nil {
		return nil, fmt.Errorf("ledger of %s: %w", target, err)
	}
	defer resp.Body.Close()
	var l struct {
		Effects []struct {
			Key        string    `json:"key"`
			ObjectID   string    `json:"object_id"`
			KeyIgnored bool      `json:"key_ignored"`
			At         time.Time `json:"at"`
		} `json:"effects"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, fmt.Errorf("ledger of %s: %w", target, err)
	}
	out := make([]Effect, len(l.Effects))
	for i, e := range l.Effects {
		out[i] = Effect{Target: target, Key: e.Key, ObjectID: e.ObjectID, KeyIgnored: e.KeyIgnored, At: e.At}
	}
	return out, nil
}

// results reads the whole results stream.
func (s *soak) results(ctx context.Context, raw *bytes.Buffer) ([]ResultMsg, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stream, err := s.js.Stream(cctx, "IDEMGATE_RESULTS")
	if err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	info, err := stream.Info(cctx)
	if err != nil {
		return nil, err
	}
	total := info.State.Msgs
	cons, err := s.js.OrderedConsumer(cctx, "IDEMGATE_RESULTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.ResultPrefix + ">"}})
	if err != nil {
		return nil, err
	}
	var out []ResultMsg
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, _ := m.Metadata()
			var r operation.Result
			if err := json.Unmarshal(m.Data(), &r); err != nil {
				continue
			}
			raw.Write(m.Data())
			raw.WriteByte('\n')
			rm := ResultMsg{Key: r.OperationKey, EventID: r.EventID, Status: string(r.Status), ObjectID: r.TargetObjectID}
			if md != nil {
				rm.At = md.Timestamp
			}
			out = append(out, rm)
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

// journal reads the journal and its trail, and dumps both as text for the
// canary search.
func (s *soak) journal(ctx context.Context, h *History) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.pg.url())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// One snapshot for the rows, the trail and the dump: a reconciler still
	// at work (an unsettled run) cannot make them disagree.
	tx, err := conn.BeginTx(cctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(cctx, `SELECT operation_key, status, coalesce(target_object_id, ''), request_hash, lease_token FROM agent_operation_log`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.Key, &r.Status, &r.ObjectID, &r.RequestHash, &r.Token); err != nil {
			return err
		}
		h.Rows = append(h.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.Query(cctx, `SELECT operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
		coalesce(outcome, ''), coalesce(error_code, ''), coalesce(note, '') FROM agent_operation_attempts`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var a Attempt
		var fin *time.Time
		if err := rows.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, &a.Started, &fin, &a.Outcome, &a.ErrorCode, &a.Note); err != nil {
			return err
		}
		if fin != nil {
			a.Finished = *fin
		}
		h.Attempts = append(h.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var dump bytes.Buffer
	for _, q := range []string{`SELECT row_to_json(l)::text FROM agent_operation_log l`, `SELECT row_to_json(a)::text FROM agent_operation_attempts a`} {
		rows, err := tx.Query(cctx, q)
		if err != nil {
			return err
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			dump.WriteString(line)
			dump.WriteByte('\n')
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	_ = os.WriteFile(filepath.Join(s.cfg.out, "logs", "journal-dump.jsonl"), dump.Bytes(), 0o644)
	h.Texts = append(h.Texts, Text{Where: "journal dump", Body: dump.Bytes()})
	return nil
}

// teardown stops everything the soak started.
func (s *soak) teardown() {
	if s.nc != nil {
		s.nc.Close()
	}
	for _, p := range s.replicas {
		p.term(10 * time.Second)
	}
	if s.sbCmd != nil && s.sbCmd.Process != nil {
		_ = s.sbCmd.Process.Kill()
		_ = s.sbCmd.Wait()
	}
	if s.nats != nil {
		s.nats.term(10 * time.Second)
	}
	if s.pg != nil {
		s.pg.shutdown()
		_ = os.RemoveAll(filepath.Join(s.pg.dir, "data"))
	}
	_ = os.RemoveAll(filepath.Join(s.cfg.out, "nats"))
	if s.runLog != nil {
		s.runLog.Close()
	}
}

// saveHistory keeps what the checker read, for whoever investigates a breach:
// history-sent.jsonl (every command and its reply), history-results.jsonl,
// history-effects.jsonl and history-attempts.jsonl.
func saveHistory(dir string, h History) error {
	write := func(name string, n int, item func(i int) any) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		enc := json.NewEncoder(f)
		for i := range n {
			if err := enc.Encode(item(i)); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	}
	if err := write("history-sent.jsonl", len(h.Sent), func(i int) any { return h.Sent[i] }); err != nil {
		return err
	}
	if err := write("history-results.jsonl", len(h.Results), func(i int) any { return h.Results[i] }); err != nil {
		return err
	}
	if err := write("history-effects.jsonl", len(h.Effects), func(i int) any { return h.Effects[i] }); err != nil {
		return err
	}
	return write("history-attempts.jsonl", len(h.Attempts), func(i int) any { return h.Attempts[i] })
}
