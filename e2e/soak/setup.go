// The world a run stands up and takes down: the throwaway PostgreSQL, the
// nats-server, the target emulators and the idemgate replicas, with the
// configuration each replica is given.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/internal/testkit/natsproc"
	"github.com/idemgate/idemgate/internal/testkit/pgproc"
)

// soakDB is the database the replicas journal into.
const soakDB = "soak"

// daemonNATS holds the names the replicas use in JetStream (the streams and
// the durable consumer the collector reads): their configuration sets only
// timings under nats:, so the names are consumer's defaults.
var daemonNATS = consumer.Config{}.WithDefaults()

// setup starts PostgreSQL, NATS, the emulators and the replicas.
func (s *soak) setup(ctx context.Context) error {
	for _, b := range []string{"idemgate", "nats-server"} {
		if _, err := os.Stat(s.bin(b)); err != nil {
			return fmt.Errorf("%s not found in --bin-dir %q (scripts/soak builds it)", b, s.cfg.binDir)
		}
	}
	if d := os.Getenv("SOAK_PG_BIN"); d != "" && os.Getenv("PGPROC_BIN") == "" {
		// The soak's own name for pgproc's PGPROC_BIN.
		os.Setenv("PGPROC_BIN", d)
	}
	var err error
	s.pg, err = pgproc.InitPrimary(filepath.Join(s.cfg.out, "pg"), soakDB)
	if err != nil {
		return err
	}
	s.logf("postgres: %s", s.pg.URL(soakDB))

	s.nats, err = natsproc.NewServer(s.bin("nats-server"), "nats-server", filepath.Join(s.cfg.out, "nats"),
		filepath.Join(s.cfg.out, "logs", "nats.log"))
	if err != nil {
		return err
	}
	if err := s.nats.Start(); err != nil {
		return err
	}
	if err := s.nats.WaitReady(ctx, 30*time.Second); err != nil {
		return err
	}
	s.logf("nats: %s", s.nats.URL())

	sbLog, err := os.Create(filepath.Join(s.cfg.out, "logs", "sandbox.log"))
	if err != nil {
		return err
	}
	s.sbCmd = exec.Command(s.bin("idemgate"), "sandbox", "--json", "--seed", fmt.Sprint(s.cfg.seed), "--bitrix24-plan", "enterprise")
	s.sbCmd.Stderr = sbLog
	out, err := s.sbCmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.sbCmd.Start(); err != nil {
		return err
	}
	var listing bytes.Buffer
	s.sb, err = readSandbox(io.TeeReader(out, &listing))
	if err != nil {
		return fmt.Errorf("%w\n%s", err, listing.String())
	}
	go func() { _, _ = io.Copy(sbLog, out) }()
	s.logf("sandbox: %v", s.sb.urls)

	s.nc, err = nats.Connect(s.nats.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectBufSize(-1))
	if err != nil {
		return err
	}
	s.js, err = jetstream.New(s.nc)
	if err != nil {
		return err
	}
	port, err := childproc.FreePort()
	if err != nil {
		return err
	}
	s.httpAPI, s.httpToken = fmt.Sprintf("127.0.0.1:%d", port), "soak-http-"+randHex(16)
	s.approverToken = "soak-approver-" + randHex(16)
	for i := range s.cfg.replicas {
		port, err := childproc.FreePort()
		if err != nil {
			return err
		}
		s.adminAddr = append(s.adminAddr, fmt.Sprintf("127.0.0.1:%d", port))
		name := fmt.Sprintf("r%d", i+1)
		cfgPath, err := s.writeConfig(i, name)
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, &childproc.Process{Name: name, Bin: s.bin("idemgate"), Args: []string{"run", "--config", cfgPath},
			Log: filepath.Join(s.cfg.out, "logs", name+".log")})
	}
	for i := range s.replicas {
		s.startReplica(i)
	}
	// The first replica creates the streams; wait for the consumer.
	err = childproc.Poll(ctx, 90*time.Second, 200*time.Millisecond, func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := s.js.Consumer(cctx, daemonNATS.CommandsStream, daemonNATS.Durable)
		return err == nil, err
	})
	if errors.Is(err, childproc.ErrTimeout) {
		return fmt.Errorf("the replicas did not create the durable consumer: %w (see %s)", err, filepath.Join(s.cfg.out, "logs"))
	}
	if err != nil {
		return err
	}
	for _, a := range s.adminAddr {
		if err := childproc.WaitTCP(ctx, a, 60*time.Second); err != nil {
			return fmt.Errorf("replica admin endpoint: %w", err)
		}
	}
	if err := childproc.WaitTCP(ctx, s.httpAPI, 60*time.Second); err != nil {
		return fmt.Errorf("r1's HTTP API: %w", err)
	}
	s.logf("replicas: %d running", len(s.replicas))
	return nil
}

func (s *soak) replicaEnv(i int, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.cfg.out}
	if s.cfg.brk != "" {
		env = append(env, "IDEMGATE_SOAK_BREAK="+string(s.cfg.brk))
	}
	return append(env, extra...)
}

func (s *soak) startReplica(i int) {
	p := s.replicas[i]
	if err := p.Start(s.replicaEnv(i)...); err != nil {
		s.logf("start %s: %v", p.Name, err)
	}
}

// writeConfig writes a replica's configuration: compressed horizons the
// daemon's start-up checks accept (call_timeout < lease_ttl; lease_ttl +
// heartbeat < ack_wait; retry.max_elapsed + call_timeout < ack_wait;
// retention above every redelivery horizon).
func (s *soak) writeConfig(i int, name string) (string, error) {
	adapters, err := s.adaptersYAML()
	if err != nil {
		return "", err
	}
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
  url: %s
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
approvals:
  sweep_interval: 500ms
  types:
    payment.charge: {approval: above, above: {RUB: %d}, approval_ttl: %s}
    payment.refund: {approval: none}
  approvers:
    - {name: soak-approver, token: %s}
%s
%s
routes:
  invoice.create: onec
  invoice.cancel: onec
  payment.charge: yookassa
  payment.refund: yookassa
  crm.task.create: bitrix24
  crm.deal.create: bitrix24
adapters:
%s`, dataDir, s.cfg.replicas, s.adminAddr[i], s.nats.URL(), s.pg.URL(soakDB), name, s.cfg.lease,
		approvalAbove, approvalTTL, s.approverToken, s.httpAPIYAML(i), processesYAML, adapters)
	p := filepath.Join(s.cfg.out, name+".yaml")
	return p, os.WriteFile(p, []byte(yaml), 0o600)
}

// httpAPIYAML serves the HTTP API on the first replica only: the sensitive
// phase speaks to it once the run has settled.
func (s *soak) httpAPIYAML(i int) string {
	if i != 0 {
		return ""
	}
	return fmt.Sprintf("http_api:\n  enabled: true\n  addr: %s\n  token: %s", s.httpAPI, s.httpToken)
}

// adaptersYAML keeps the emulators the routes use, gives Bitrix24 a settle
// time above the call timeout (a dead owner's late add must land before a
// "not found" is trusted) and each replica its share of the portal's rate
// limit, and YooKassa compressed lookup horizons.
func (s *soak) adaptersYAML() (string, error) {
	var b strings.Builder
	for _, name := range []string{"bitrix24", "onec", "yookassa"} {
		block, err := s.sb.adapterYAML(name)
		if err != nil {
			return "", err
		}
		b.WriteString(block)
		switch name {
		case "bitrix24":
			// Each replica takes its share of the portal's limit (the
			// sandbox runs an Enterprise portal: 250 requests, leaking 5/s).
			b.WriteString("    settle_time: 5s\n")
			fmt.Fprintf(&b, "    rate_limit: {rate: %.3f, burst: %d}\n", 5/float64(s.cfg.replicas), 250/s.cfg.replicas)
		case "yookassa":
			// One machine's clock: the lookup's skew compressed with the
			// other horizons, and one call above the worker's call
			// timeout. The first attempt's window then holds a few
			// hundred payments at 100/s.
			b.WriteString("    timeout: 5s\n    lookup_skew: 2s\n")
			if s.cfg.knownDefects {
				// fault:native_key_dropped puts a connector that drops
				// the key in front of YooKassa: declared, so lookups
				// read the calls' whole window.
				b.WriteString("    connector_drops_key: true\n")
			}
		}
	}
	return b.String(), nil
}

// teardown stops everything the soak started.
func (s *soak) teardown() {
	if s.nc != nil {
		s.nc.Close()
	}
	for _, p := range s.replicas {
		p.Term(10 * time.Second)
	}
	if s.sbCmd != nil && s.sbCmd.Process != nil {
		_ = s.sbCmd.Process.Kill()
		_ = s.sbCmd.Wait()
	}
	if s.nats != nil {
		s.nats.Term(10 * time.Second)
	}
	if s.pg != nil {
		_ = s.pg.Remove() // the data goes, its log stays in the run's folder
	}
	_ = os.RemoveAll(filepath.Join(s.cfg.out, "nats"))
	if s.runLog != nil {
		s.runLog.Close()
	}
}
