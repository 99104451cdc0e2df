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
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/testkit/natsproc"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
)

// natsServerBin is nats-server built once per test binary from the module
// in go.mod (the version the embedded server runs), beside the idemgate
// binary (TestMain removes the folder).
var natsServerBin = sync.OnceValues(func() (string, error) {
	return natsproc.Build(filepath.Dir(binary))
})

// targetNamed returns the row of targets with that subtest name.
func targetNamed(t *testing.T, name string) target {
	for _, tg := range targets {
		if tg.name == name {
			return tg
		}
	}
	t.Fatalf("no target %s", name)
	return target{}
}

// fleet is the configuration of one of replicas daemons sharing natsURL
// (one server or a comma-separated list, streams of natsReplicas) and the
// cluster's journal.
func (c *cluster) fleet(natsURL string, natsReplicas, replicas int) daemonConfig {
	return daemonConfig{natsURL: natsURL, natsReplicas: natsReplicas, replicas: replicas, dsn: c.dsn, h: defaultHorizons}
}

// configWith is startFleet's config for dc.
func (c *cluster) configWith(dc daemonConfig) func(owner string) string {
	return func(owner string) string { return c.writeConfig(owner, dc) }
}

// sent is one command of a load run and what JetStream said of it.
type sent struct {
	intent, eventID string
	via             string // the node the publishing connection was given
	acked           time.Time
	seq             uint64
	dup             bool // PubAck.Duplicate: JetStream already held this event id
	retries         int  // publications after the first (no PubAck in time)
	err             error
}

// TestNATSClusterNodeLoss (budget ≤ 3 min): three nats-server processes in
// one JetStream cluster, R3 streams, three daemon replicas on PostgreSQL.
// Under steady load (~20 % copies, half with the same event id, half with a
// new one) published through each node in turn, the commands stream
// leader's node is killed (SIGKILL) and started again later. Every intent
// gets one effect in the emulator's ledger and a final result, every
// PubAck'd command is still in the stream and consumed, and the restarted
// node catches up. The times to a new stream leader, to the first PubAck
// and to the first result after the kill are measured and logged.
func TestNATSClusterNodeLoss(t *testing.T) {
	skipShort(t)
	began := time.Now()
	bin, err := natsServerBin()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	dir := t.TempDir()
	cl, err := natsproc.StartCluster(ctx, bin, filepath.Join(dir, "nats"), 3)
	require.NoError(t, err)
	t.Cleanup(func() {
		cl.Stop()
		if t.Failed() {
			for _, nd := range cl.Nodes {
				if b, err := os.ReadFile(nd.Log); err == nil {
					t.Logf("---- %s log (tail) ----\n%s", nd.Name, tail(string(b), 40))
				}
			}
		}
	})

	tgt := targetNamed(t, "1c_invoice")
	c := &cluster{t: t, tgt: tgt, dir: dir}
	c.sb = tgt.start(t)
	c.dsn = pgtest.Schema(t)
	c.openStore(ctx)

	// One publishing connection per node, each given only that node: the
	// cluster's gossip lets it move to another node when its own dies.
	type pubConn struct {
		node   string
		client *producer.Client
		js     jetstream.JetStream
	}
	var pubs []pubConn
	for _, nd := range cl.Nodes {
		nc, err := nats.Connect(nd.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
			nats.RetryOnFailedConnect(true))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		pc, err := producer.New(nc, "")
		require.NoError(t, err)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		pubs = append(pubs, pubConn{node: nd.Name, client: pc, js: js})
	}

	ds := c.startFleet([]string{"cluster-replica-a", "cluster-replica-b", "cluster-replica-c"},
		c.configWith(c.fleet(cl.URLs(), 3, 3)))
	t.Logf("3 nats-server processes and 3 replicas running after %v", time.Since(began).Round(time.Millisecond))

	cons := consumer.Config{}.WithDefaults()
	js := pubs[0].js
	info, err := streamInfo(ctx, js, cons.CommandsStream)
	require.NoError(t, err)
	require.Equal(t, 3, info.Config.Replicas, "the daemons created R3 streams")
	require.Len(t, info.Cluster.Replicas, 2)

	// Results, read from the start of the results stream.
	results := newResultLog()
	oc, err := js.OrderedConsumer(ctx, cons.ResultsStream, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	cc, err := oc.Consume(func(m jetstream.Msg) {
		var r operation.Result
		if json.Unmarshal(m.Data(), &r) == nil {
			results.add(r)
		}
	})
	require.NoError(t, err)
	defer cc.Stop()

	const (
		rate      = 25 // commands per second
		loadFor   = 30 * time.Second
		killAt    = 10 * time.Second
		restartAt = 20 * time.Second
	)
	var (
		mu        sync.Mutex
		all       []*sent
		intents   []string
		published atomic.Int64
	)
	rng := rand.New(rand.NewPCG(15, 3))
	publish := func(s *sent, pc pubConn) {
		cmd := c.command(s.eventID, s.intent, false)
		deadline := time.Now().Add(60 * time.Second)
		for {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			ack, err := pc.client.PublishWith(pctx, cmd, producer.PublishOptions{})
			pcancel()
			if err == nil {
				mu.Lock()
				s.acked, s.seq, s.dup = time.Now(), ack.Sequence, ack.Duplicate
				mu.Unlock()
				return
			}
			mu.Lock()
			s.retries++
			mu.Unlock()
			if time.Now().After(deadline) || ctx.Err() != nil {
				mu.Lock()
				s.err = err
				mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond) // the same event id again: JetStream keeps one
		}
	}

	var (
		killed, leaderBack, firstAckAfter, firstResultAfter time.Time
		killedNode                                          string
		wg                                                  sync.WaitGroup
	)
	loadStart := time.Now()
	tick := time.NewTicker(time.Second / rate)
	restarted := false
	for i := 0; time.Since(loadStart) < loadFor; i++ {
		<-tick.C
		if killed.IsZero() && time.Since(loadStart) >= killAt {
			info, err := streamInfo(ctx, js, cons.CommandsStream)
			require.NoError(t, err)
			killedNode = info.Cluster.Leader
			nd := cl.Node(killedNode)
			require.NotNil(t, nd, "leader %q", killedNode)
			require.NoError(t, nd.Kill9())
			killed = time.Now()
			t.Logf("kill -9 %s (commands stream leader) at %v, %d commands published", killedNode,
				killed.Sub(loadStart).Round(time.Millisecond), published.Load())
			go func() {
				for ctx.Err() == nil {
					info, err := streamInfo(ctx, pubs[otherThan(cl, killedNode)].js, cons.CommandsStream)
					if err == nil && info.Cluster.Leader != "" && info.Cluster.Leader != killedNode {
						mu.Lock()
						leaderBack = time.Now()
						mu.Unlock()
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		if !restarted && time.Since(loadStart) >= restartAt {
			require.NoError(t, cl.Node(killedNode).Start())
			restarted = true
			t.Logf("%s started again at %v", killedNode, time.Since(loadStart).Round(time.Millisecond))
		}
		pc := pubs[i%len(pubs)]
		var s *sent
		mu.Lock()
		if len(intents) > 10 && rng.IntN(5) == 0 {
			// A copy of an earlier intent: same event id (JetStream's window
			// keeps one) or a new one (the journal keeps one).
			in := intents[rng.IntN(len(intents))]
			ev := "ev-" + in
			if rng.IntN(2) == 0 {
				ev = fmt.Sprintf("ev-%s-copy-%d", in, i)
			}
			s = &sent{intent: in, eventID: ev, via: pc.node}
		} else {
			in := fmt.Sprintf("cl-%04d", i)
			intents = append(intents, in)
			s = &sent{intent: in, eventID: "ev-" + in, via: pc.node}
		}
		all = append(all, s)
		mu.Unlock()
		published.Add(1)
		wg.Add(1)
		go func() { defer wg.Done(); publish(s, pc) }()
	}
	tick.Stop()
	wg.Wait()
	loadDone := time.Now()

	// Every intent ends with a final result.
	waitFor(t, 2*time.Minute, "a final result for every intent", func() (bool, string) {
		missing := 0
		for _, in := range intents {
			if _, ok := results.final(c.key(in)); !ok {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d intents without a final result", missing, len(intents))
	})
	settled := time.Now()

	mu.Lock()
	defer mu.Unlock()
	unique := map[uint64]bool{}
	dups, afterKill, retries := 0, 0, 0
	for _, s := range all {
		require.NoError(t, s.err, "command %s via %s never acknowledged", s.eventID, s.via)
		// A duplicate's PubAck names the sequence JetStream kept for the
		// event id (a copy, or a retry after a lost PubAck).
		unique[s.seq] = true
		retries += s.retries
		if s.dup {
			dups++
		}
		if s.acked.After(killed) {
			afterKill++
			if firstAckAfter.IsZero() || s.acked.Before(firstAckAfter) {
				firstAckAfter = s.acked
			}
		}
	}
	for _, in := range intents {
		r, _ := results.final(c.key(in))
		require.Equal(t, operation.ResultSucceeded, r.Status, "intent %s: %+v", in, r)
		if at := results.firstSeen(c.key(in)); at.After(killed) && (firstResultAfter.IsZero() || at.Before(firstResultAfter)) {
			firstResultAfter = at
		}
	}

	// The ledger: one effect per intent, none twice.
	byKey := c.sb.core.Ledger().ByKey()
	for _, in := range intents {
		require.Equal(t, 1, byKey[c.key(in)], "intent %s: effects in the ledger", in)
	}
	require.Equal(t, len(intents), c.sb.core.Ledger().Total(), "effects = intents")

	// Nothing lost between PubAck and consumption: every acknowledged
	// sequence is in the stream, and the durable consumer has acknowledged
	// all of them.
	info, err = streamInfo(ctx, js, cons.CommandsStream)
	require.NoError(t, err)
	require.Equal(t, uint64(len(unique)), info.State.Msgs, "the stream holds every PubAck'd command, once")
	var maxSeq uint64
	for seq := range unique {
		maxSeq = max(maxSeq, seq)
	}
	require.Equal(t, maxSeq, info.State.LastSeq)
	// A copy sent last may still be in flight after its intent's result.
	waitFor(t, time.Minute, "the durable consumer to acknowledge every command", func() (bool, string) {
		cinfo, err := js.Consumer(ctx, cons.CommandsStream, cons.Durable)
		if err != nil {
			return false, err.Error()
		}
		ci := cinfo.CachedInfo()
		return ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream == info.State.LastSeq,
			fmt.Sprintf("pending %d, ack pending %d, ack floor %d of %d", ci.NumPending, ci.NumAckPending, ci.AckFloor.Stream, info.State.LastSeq)
	})
	for _, in := range intents {
		rec, err := c.store.Get(ctx, c.key(in))
		require.NoError(t, err)
		require.Equal(t, journal.StatusSucceeded, rec.Status, in)
	}

	// The restarted node catches up: it is a current replica again.
	waitFor(t, time.Minute, killedNode+" current again", func() (bool, string) {
		info, err := streamInfo(ctx, js, cons.CommandsStream)
		if err != nil {
			return false, err.Error()
		}
		var peers []string
		ok := false
		for _, p := range info.Cluster.Replicas {
			peers = append(peers, fmt.Sprintf("%s current=%v lag=%d", p.Name, p.Current, p.Lag))
			if p.Name == killedNode && p.Current && p.Lag == 0 {
				ok = true
			}
		}
		if info.Cluster.Leader == killedNode {
			ok = true
		}
		return ok, fmt.Sprintf("leader %s, replicas %s", info.Cluster.Leader, strings.Join(peers, "; "))
	})

	for _, d := range ds {
		select {
		case <-d.exited:
			t.Fatalf("replica %s exited during the node loss", d.name)
		default:
		}
	}
	ms := func(at time.Time) string {
		if at.IsZero() {
			return "n/a"
		}
		return at.Sub(killed).Round(time.Millisecond).String()
	}
	t.Logf("measured: %d commands (%d intents, %d PubAcks marked duplicate, %d journal copies, %d publications retried) through %d nodes in %v; "+
		"after kill -9 of %s: new stream leader after %s, first PubAck after %s, first final result after %s; "+
		"all settled %v after the load ended; %d commands acknowledged after the kill; whole test %v",
		len(all), len(intents), dups, len(unique)-len(intents), retries, len(cl.Nodes), loadDone.Sub(loadStart).Round(time.Millisecond),
		killedNode, ms(leaderBack), ms(firstAckAfter), ms(firstResultAfter),
		settled.Sub(loadDone).Round(time.Millisecond), afterKill, time.Since(began).Round(time.Millisecond))
}

func otherThan(cl *natsproc.Cluster, name string) int {
	for i, nd := range cl.Nodes {
		if nd.Name != name {
			return i
		}
	}
	return 0
}

func streamInfo(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := js.Stream(ictx, name)
	if err != nil {
		return nil, err
	}
	info := st.CachedInfo()
	if info.Cluster == nil {
		return nil, fmt.Errorf("stream %s: no cluster information", name)
	}
	return info, nil
}

// resultLog collects results by operation key.
type resultLog struct {
	mu    sync.Mutex
	byKey map[string][]operation.Result
	first map[string]time.Time
}

func newResultLog() *resultLog {
	return &resultLog{byKey: map[string][]operation.Result{}, first: map[string]time.Time{}}
}

func (l *resultLog) add(r operation.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byKey[r.OperationKey] = append(l.byKey[r.OperationKey], r)
	if _, ok := l.first[r.OperationKey]; !ok && r.Status != operation.ResultPending {
		l.first[r.OperationKey] = time.Now()
	}
}

// final is the key's last non-pending result.
func (l *resultLog) final(key string) (operation.Result, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.byKey[key]
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Status != operation.ResultPending {
			return rs[i], true
		}
	}
	return operation.Result{}, false
}

func (l *resultLog) firstSeen(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first[key]
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
