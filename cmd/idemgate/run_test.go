package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
)

// startDaemon runs the daemon with c until the test ends.
func startDaemon(t *testing.T, c Config, logs *lockedWriter) *daemon {
	t.Helper()
	require.NoError(t, c.validate())
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *daemon, 1)
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, c, newLogger(c, logs), func(d *daemon) { started <- d }) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case d := <-started:
		return d
	case err := <-done:
		done <- err
		t.Fatalf("daemon ended: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not start")
	}
	return nil
}

func testDaemonConfig(t *testing.T) Config {
	c := testDefaults()
	c.Env = "test"
	c.DataDir = t.TempDir()
	c.Admin.Addr = "127.0.0.1:0"
	c.NATS.EmbeddedAddr = "127.0.0.1:0" // the daemon's natsAddr names the port it took
	c.NATS.FetchWait = 50 * time.Millisecond
	return c
}

// TestNoRoutesWarningTellsWhatHappens: a daemon with no routes warns that
// commands stay in JetStream (they are not rejected), and a valid command
// indeed stays there, unanswered and not terminated.
func TestNoRoutesWarningTellsWhatHappens(t *testing.T) {
	t.Parallel()
	c := testDaemonConfig(t)
	logs := &lockedWriter{w: &bytes.Buffer{}}
	d := startDaemon(t, c, logs)
	require.Contains(t, logs.String(), `"msg":"no routes configured: commands stay in JetStream, unacknowledged, until a replica with a route`)
	require.NotContains(t, logs.String(), "rejected")

	nc, err := nats.Connect("nats://" + d.natsAddr)
	require.NoError(t, err)
	defer nc.Close()
	cl, err := producer.New(nc, "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cl.Publish(ctx, operation.Command{EventID: "evt-unrouted", Operation: "payment.charge", ApprovalID: "appr-1",
		Payload: []byte(`{"account_id":"merchant-account-17","order_id":"order-1","amount_minor":100,"currency":"RUB"}`)})
	require.NoError(t, err)
	unrouted := func() float64 {
		mfs, err := d.registry.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "idemgate_commands_unrouted_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return unrouted() >= 1 }, 30*time.Second, 20*time.Millisecond)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	cmds, err := js.Stream(ctx, c.NATS.CommandsStream)
	require.NoError(t, err)
	info, err := cmds.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "the command stays in JetStream")
	cons, err := js.Consumer(ctx, c.NATS.CommandsStream, c.NATS.Durable)
	require.NoError(t, err)
	ci, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ci.NumAckPending, "delivered, neither acknowledged nor terminated")
	// The scrape names the build it came from.
	mfs, err := d.registry.Gather()
	require.NoError(t, err)
	want := readBuildInfo()
	var build map[string]string
	for _, mf := range mfs {
		if mf.GetName() == "idemgate_build_info" {
			m := mf.GetMetric()[0]
			require.Equal(t, 1.0, m.GetGauge().GetValue())
			build = map[string]string{}
			for _, l := range m.GetLabel() {
				build[l.GetName()] = l.GetValue()
			}
		}
	}
	require.NotNil(t, build, "idemgate_build_info is exported")
	require.Equal(t, want.Version, build["version"])
	require.Equal(t, want.Go, build["go"])
	require.True(t, strings.HasPrefix(build["commit"], want.Commit), "commit %q", build["commit"])
	res, err := js.Stream(ctx, c.NATS.ResultsStream)
	require.NoError(t, err)
	rinfo, err := res.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, rinfo.State.Msgs, "no result: not rejected")
}

// TestReadyzIsBoundedAndCheap: /readyz answers within its own deadline and
// does not rebuild the migration check on every probe: with the migrations
// table locked by another session (a replica migrating) it still answers
// ready; with every journal connection taken it answers 503 "journal
// unreachable" instead of hanging; once they are back, ready again.
func TestReadyzIsBoundedAndCheap(t *testing.T) {
	t.Parallel()
	c := testDaemonConfig(t)
	c.Journal.URL = pgtest.Schema(t)
	d := startDaemon(t, c, &lockedWriter{w: &bytes.Buffer{}})
	readyz := "http://" + d.adminAddr + "/readyz"
	require.Equal(t, "200 ok\n", httpGet(t, readyz))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.Journal.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE goose_db_version IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	for range 3 {
		require.Equal(t, "200 ok\n", httpGet(t, readyz), "probes do not read the migrations table again")
	}
	require.NoError(t, tx.Rollback(ctx))

	// Take every connection of the daemon's pool (waiting for those its
	// loops hold to come back), so that the journal cannot answer.
	pool := d.store.(*postgres.Store).Pool()
	var held []*pgxpool.Conn
	release := func() {
		for _, pc := range held {
			pc.Release()
		}
		held = nil
	}
	t.Cleanup(release) // before the daemon stops: closing a pool waits for its connections
	for int32(len(held)) < pool.Config().MaxConns {
		pc, err := pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, pc)
	}
	got := httpGet(t, readyz)
	require.True(t, strings.HasPrefix(got, "503 "), got)
	require.Contains(t, got, "journal unreachable")
	release()
	require.Equal(t, "200 ok\n", httpGet(t, readyz))
}
