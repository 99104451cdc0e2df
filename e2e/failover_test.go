package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/internal/testkit/pgproc"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

// pgPair is a primary and a streaming standby (pg_basebackup -R) on
// loopback, and the multi-host URL a daemon uses to reach whichever of them
// accepts writes.
type pgPair struct {
	primary, standby *pgproc.Server
	url              string
}

func startPGPair(t *testing.T) *pgPair {
	t.Helper()
	// Under /tmp, not t.TempDir(): the postgres user must reach the folder.
	dir, err := os.MkdirTemp("", "idemgate-e2e-pg-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	p := &pgPair{}
	t.Cleanup(func() {
		for _, s := range []*pgproc.Server{p.primary, p.standby} {
			if s != nil {
				if t.Failed() {
					if b, err := os.ReadFile(s.Log()); err == nil {
						t.Logf("---- PostgreSQL %s log (tail) ----\n%s", s.Addr(), tail(string(b), 30))
					}
				}
				_ = s.Remove()
			}
		}
		_ = os.RemoveAll(dir)
	})
	began := time.Now()
	p.primary, err = pgproc.InitPrimary(filepath.Join(dir, "primary"), "idemgate")
	require.NoError(t, err)
	p.standby, err = pgproc.Standby(p.primary, filepath.Join(dir, "standby"))
	require.NoError(t, err)
	p.url = fmt.Sprintf("postgres://postgres@%s,%s/idemgate?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		p.primary.Addr(), p.standby.Addr())
	t.Logf("PostgreSQL primary %s and streaming standby %s in %v", p.primary.Addr(), p.standby.Addr(),
		time.Since(began).Round(time.Millisecond))
	return p
}

// query runs one statement on a single server (not through the
// multi-host URL) and returns the first column of the first row.
func pgQuery(ctx context.Context, s *pgproc.Server, sql string, args ...any) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL("idemgate"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var v any
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// failoverWorld starts a primary and its standby, and a cluster whose
// journal is the pair and whose NATS is an embedded server; ctx ends with
// the test's budget.
func failoverWorld(t *testing.T) (*pgPair, *cluster, context.Context) {
	t.Helper()
	p := startPGPair(t)
	tgt := targetNamed(t, "1c_invoice")
	c := &cluster{t: t, tgt: tgt, dir: t.TempDir(), dsn: p.url}
	c.sb = tgt.start(t)
	c.embeddedNATS()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return p, c, ctx
}

// TestPostgresFailover (budget ≤ 2 min): two daemon replicas on a
// multi-host URL with target_session_attrs=read-write. Mid-load the primary
// is stopped (-m immediate, like a crash) and the standby promoted. The
// daemons reconnect to the new primary by themselves; commands in flight
// during the switch are redelivered and end with a final result; the
// ledger holds one effect per intent. The time from the promotion to the
// first result of a command sent after it is measured and logged.
func TestPostgresFailover(t *testing.T) {
	skipShort(t)
	began := time.Now()
	p, c, ctx := failoverWorld(t)

	ds := c.startFleet([]string{"failover-replica-a", "failover-replica-b"}, c.configWith(c.fleet(c.ns.URL(), 1, 2)))
	c.openStore(ctx)

	const (
		rate     = 20
		loadFor  = 20 * time.Second
		switchAt = 7 * time.Second
	)
	type sentCmd struct {
		intent string
		at     time.Time
		res    chan asyncResult
		got    time.Time // when the final result arrived
	}
	var (
		cmds              []*sentCmd
		resMu             sync.Mutex
		intents           []string
		stopped, promoted time.Time
	)
	rng := rand.New(rand.NewPCG(15, 2))
	loadStart := time.Now()
	tick := time.NewTicker(time.Second / rate)
	var switchWG sync.WaitGroup
	for i := 0; time.Since(loadStart) < loadFor; i++ {
		<-tick.C
		if stopped.IsZero() && time.Since(loadStart) >= switchAt {
			stopped = time.Now()
			require.NoError(t, p.primary.StopImmediate())
			t.Logf("primary %s stopped (-m immediate) at %v", p.primary.Addr(), stopped.Sub(loadStart).Round(time.Millisecond))
			switchWG.Add(1)
			go func() {
				defer switchWG.Done()
				time.Sleep(time.Second) // an operator's or Patroni's reaction time
				if err := p.standby.Promote(); err != nil {
					t.Errorf("promote: %v", err)
					return
				}
				promoted = time.Now()
			}()
		}
		in := fmt.Sprintf("fo-%04d", i)
		ev := "ev-" + in
		if len(intents) > 10 && rng.IntN(5) == 0 {
			in = intents[rng.IntN(len(intents))]
			ev = fmt.Sprintf("ev-%s-copy-%d", in, i)
		} else {
			intents = append(intents, in)
		}
		sc := &sentCmd{intent: in, at: time.Now(), res: make(chan asyncResult, 1)}
		cmds = append(cmds, sc)
		src := c.sendAsync(c.command(ev, in, false))
		go func() {
			r := <-src
			resMu.Lock()
			sc.got = time.Now()
			resMu.Unlock()
			sc.res <- r
		}()
	}
	tick.Stop()
	switchWG.Wait()
	require.False(t, promoted.IsZero(), "the standby was promoted")

	var firstAfter time.Time
	pendingSeen, during := 0, 0
	for _, s := range cmds {
		r := c.await(s.res)
		resMu.Lock()
		got := s.got
		resMu.Unlock()
		if got.After(promoted) && (firstAfter.IsZero() || got.Before(firstAfter)) {
			firstAfter = got
		}
		require.Equal(t, operation.ResultSucceeded, r.res.Status, "intent %s: %+v", s.intent, r.res)
		if r.sawPending {
			pendingSeen++
		}
		if s.at.After(stopped.Add(-2*time.Second)) && s.at.Before(promoted) {
			during++
		}
	}

	byKey := c.sb.core.Ledger().ByKey()
	for _, in := range intents {
		require.Equal(t, 1, byKey[c.key(in)], "intent %s: effects in the ledger", in)
	}
	require.Equal(t, len(intents), c.sb.core.Ledger().Total(), "effects = intents")
	redelivered := 0
	for _, in := range intents {
		rec, atts := c.row(c.key(in))
		require.Equal(t, journal.StatusSucceeded, rec.Status, "%s: %s", in, describe(rec, atts))
		if rec.LeaseToken > 1 {
			redelivered++
		}
	}
	// Commands whose claim met the switch were handed back to JetStream
	// and redelivered (counted from the daemons' logs), then settled above.
	nakked, fetched := 0, 0.0
	for _, d := range ds {
		fetched += d.metric(t, "idemgate_commands_fetched_total")
		for _, line := range d.out.Lines() {
			var l struct {
				Msg   string `json:"msg"`
				Batch int    `json:"batch"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "claim failed: commands will be redelivered") {
				nakked += l.Batch
			}
		}
	}
	require.Positive(t, nakked, "claims met the switch and were handed back for redelivery")
	require.GreaterOrEqual(t, int(fetched), len(cmds)+nakked, "every handed-back command was delivered again")
	// The new primary is the old standby.
	inRecovery, err := pgQuery(ctx, p.standby, "select pg_is_in_recovery()")
	require.NoError(t, err)
	require.Equal(t, "false", inRecovery)
	for _, d := range ds {
		select {
		case <-d.exited:
			t.Fatalf("replica %s exited during the failover", d.name)
		default:
		}
	}
	// The first final result after the promotion: a daemon wrote to the
	// new primary.
	reconnect := "n/a"
	if !firstAfter.IsZero() {
		reconnect = firstAfter.Sub(promoted).Round(time.Millisecond).String()
	}
	t.Logf("measured: %d commands, %d intents; primary stopped → standby promoted in %v; %d commands sent "+
		"between 2 s before the stop and the promotion, %d callers saw a pending result, %d intents taken over "+
		"with a new fencing token, %d claims handed back to JetStream at the switch, %d deliveries in all; first final result %s after the promotion; whole test %v",
		len(cmds), len(intents), promoted.Sub(stopped).Round(time.Millisecond), during, pendingSeen, redelivered,
		nakked, int(fetched), reconnect, time.Since(began).Round(time.Millisecond))
}

// TestPostgresAsyncFailoverLosesCompletion (budget ≤ 2 min): with
// asynchronous replication a completion the primary acknowledged can be
// lost with it. The claim (status started, attempt 1) reaches the standby;
// the standby's WAL receiver is then cut, the call succeeds, the daemon
// records the completion on the primary and publishes "succeeded". The
// primary is stopped (-m immediate) and the standby promoted: there the row
// is still started. The reconciler takes it over and LOOKS IT UP in the
// target by key — found, no second create — and a later copy of the
// command is answered from the journal with the same object.
func TestPostgresAsyncFailoverLosesCompletion(t *testing.T) {
	skipShort(t)
	began := time.Now()
	p, c, ctx := failoverWorld(t)

	// A long call (the target holds the create) leaves time to cut the
	// replication between the claim and the completion.
	const hold = 5 * time.Second
	dc := c.fleet(c.ns.URL(), 1, 1)
	dc.h = horizons{ackWait: 30 * time.Second, leaseTTL: 12 * time.Second, callTimeout: 10 * time.Second,
		heartbeat: time.Second, inLease: 3 * time.Second}
	c.startFleet([]string{"async-replica"}, c.configWith(dc))
	c.openStore(ctx)

	const intent = "async-lost-1"
	key := c.key(intent)
	require.NoError(t, c.sb.core.InjectFault(sandbox.Fault{Kind: sandbox.FaultDelay, Delay: hold, Count: 1}))
	first := c.sendAsync(c.command("ev-"+intent, intent, false))

	statusOn := func(s *pgproc.Server) string {
		v, err := pgQuery(ctx, s, "select status from agent_operation_log where operation_key = $1", key)
		if err != nil {
			return "error: " + err.Error()
		}
		return v
	}
	waitFor(t, 30*time.Second, "the claim on the standby", func() (bool, string) {
		st := statusOn(p.standby)
		return st == "started", st
	})
	// Cut the standby off its primary: what the primary commits from now
	// on stays there.
	conn, err := pgx.Connect(ctx, p.standby.URL("idemgate"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	conn.Close(ctx)
	waitFor(t, 20*time.Second, "the standby's WAL receiver to stop", func() (bool, string) {
		n, err := pgQuery(ctx, p.standby, "select count(*) from pg_stat_wal_receiver")
		return err == nil && n == "0", fmt.Sprint(n, err)
	})

	// The completion is acknowledged: the agent has its result, the
	// primary has the row succeeded.
	r := c.await(first)
	require.Equal(t, operation.ResultSucceeded, r.res.Status, "%+v", r.res)
	objectID := r.res.TargetObjectID
	require.NotEmpty(t, objectID)
	require.Equal(t, "succeeded", statusOn(p.primary))
	require.Equal(t, 1, c.sb.core.Ledger().Count(key))
	creates, _ := c.sb.requests.creates()
	require.Equal(t, 1, creates)

	// The standby never saw it; promoted, it is what the daemon finds.
	require.Equal(t, "started", statusOn(p.standby), "the completion did not reach the standby")
	require.NoError(t, p.primary.StopImmediate())
	require.NoError(t, p.standby.Promote())
	promoted := time.Now()
	t.Logf("primary stopped, standby promoted with the row still started")

	var rec journal.Record
	var atts []journal.Attempt
	waitFor(t, 60*time.Second, "the reconciler to settle the lost completion on the new primary", func() (bool, string) {
		var ok bool
		rec, atts, ok = c.rowIf(key)
		if !ok {
			return false, "no row"
		}
		return rec.Status == journal.StatusSucceeded, describe(rec, atts)
	})
	settled := time.Since(promoted)
	require.Equal(t, objectID, rec.TargetObjectID, "the lookup found the object the lost completion named")
	require.Equal(t, 1, c.sb.core.Ledger().Count(key), "no second effect: %s", describe(rec, atts))
	creates, _ = c.sb.requests.creates()
	require.Equal(t, 1, creates, "no second create reached the target")
	require.Len(t, attemptsOf(atts, journal.KindExecute), 1, "one execution, the one before the failover: %s", describe(rec, atts))
	rec1 := attemptsOf(atts, journal.KindReconcile)
	require.NotEmpty(t, rec1, "the reconciler took the row over: %s", describe(rec, atts))
	require.Equal(t, journal.OutcomeSucceeded, rec1[len(rec1)-1].Outcome, describe(rec, atts))
	require.Greater(t, rec.LeaseToken, int64(1), "taken over with a new fencing token")

	// The agent sends the command again (a new event id): answered from
	// the journal, same object, still one effect.
	again := c.send(c.command("ev-"+intent+"-again", intent, false))
	require.Equal(t, operation.ResultSucceeded, again.Status)
	require.Equal(t, objectID, again.TargetObjectID)
	require.Equal(t, 1, c.sb.core.Ledger().Count(key))
	t.Logf("measured: lost completion settled by lookup %v after the promotion; trail %s; whole test %v",
		settled.Round(time.Millisecond), describe(rec, atts), time.Since(began).Round(time.Millisecond))
}
