package consumer

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/ctxsleep"
)

// ClusterCheck is what CheckCluster learnt of the NATS servers behind a
// connection.
type ClusterCheck struct {
	// Cluster is the connected server's cluster name; "" for a server that
	// is not clustered.
	Cluster string
	// Servers is how many distinct servers of the cluster the client knows
	// (configured and gossiped); 1 when not clustered.
	Servers int
	// Warning, when set, is a configuration that works but loses data with
	// one node: a clustered server running R1 streams.
	Warning string
}

// ReplicasAboveClusterError refuses nats.replicas above the number of
// servers that could hold a replica each.
type ReplicasAboveClusterError struct {
	Want    int
	Cluster string // "" when the server is not clustered
	Servers int
}

func (e *ReplicasAboveClusterError) Error() string {
	if e.Cluster == "" {
		return fmt.Sprintf("nats.replicas %d: the NATS server is not clustered, so a stream has one replica (set nats.replicas: 1, or point nats.url at a cluster of at least %d JetStream servers)", e.Want, e.Want)
	}
	return fmt.Sprintf("nats.replicas %d: NATS cluster %q has %d servers, and each replica of a stream needs its own server (set nats.replicas to at most %d, or grow the cluster)", e.Want, e.Cluster, e.Servers, e.Servers)
}

// ReplicasMismatchError reports a stream that exists with another replica
// count than nats.replicas. idemgate does not rescale a stream by itself:
// two daemon replicas started with different settings would undo each
// other's change, so it is the operator's deliberate act.
type ReplicasMismatchError struct {
	Stream     string
	Have, Want int
}

func (e *ReplicasMismatchError) Error() string {
	return fmt.Sprintf("stream %s exists with %d replica(s) but nats.replicas is %d: idemgate does not rescale a stream itself; either set nats.replicas: %d, or rescale it once (nats stream edit %s --replicas %d) and start again",
		e.Stream, e.Have, e.Want, e.Have, e.Stream, e.Want)
}

// clusterSettle bounds how long CheckCluster waits for the cluster's other
// servers to be gossiped to a fresh connection before it counts them.
const clusterSettle = 3 * time.Second

// CheckCluster compares nats.replicas with the servers behind nc before the
// streams are ensured: it refuses more replicas than servers (a
// *ReplicasAboveClusterError, which no restart cures), and warns when a
// clustered server would run R1 streams (the node holding them takes the
// accepted commands with it).
func CheckCluster(ctx context.Context, nc *nats.Conn, c Config) (ClusterCheck, error) {
	chk := ClusterCheck{Cluster: nc.ConnectedClusterName(), Servers: 1}
	if chk.Cluster == "" {
		if c.Replicas > 1 {
			return chk, &ReplicasAboveClusterError{Want: c.Replicas}
		}
		return chk, nil
	}
	// The other servers' addresses arrive in INFO messages shortly after
	// the connection; a count below the wanted replicas is given a moment.
	deadline := time.Now().Add(clusterSettle)
	for {
		chk.Servers = knownServers(nc)
		if chk.Servers >= c.Replicas || time.Now().After(deadline) {
			break
		}
		if !ctxsleep.For(ctx, 100*time.Millisecond) {
			return chk, ctx.Err()
		}
	}
	if c.Replicas > chk.Servers {
		// A cluster that does not advertise its servers (no_advertise,
		// behind a load balancer) shows fewer than it has: a commands
		// stream already placed on the wanted replicas proves them.
		if n := placedReplicas(ctx, nc, c.CommandsStream); n >= c.Replicas {
			chk.Servers = n
		} else {
			return chk, &ReplicasAboveClusterError{Want: c.Replicas, Cluster: chk.Cluster, Servers: chk.Servers}
		}
	}
	if c.Replicas == 1 {
		chk.Warning = fmt.Sprintf("nats: cluster %q has %d servers but nats.replicas is 1: each stream lives on one node, and losing that node loses the commands it acknowledged; set nats.replicas: 3", chk.Cluster, chk.Servers)
	}
	return chk, nil
}

// knownServers counts the distinct host:port pairs of the client's server
// pool (the configured URLs and those the cluster gossiped).
func knownServers(nc *nats.Conn) int {
	seen := map[string]bool{}
	for _, s := range nc.Servers() {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			continue
		}
		host := strings.ToLower(u.Host)
		if u.Port() == "" {
			host += ":4222"
		}
		seen[host] = true
	}
	return max(len(seen), 1)
}

// placedReplicas is how many servers hold the named stream (leader and
// followers), 0 when it does not exist or cannot be read.
func placedReplicas(ctx context.Context, nc *nats.Conn, stream string) int {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(ictx, stream)
	if err != nil {
		return 0
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return 0
	}
	return 1 + len(info.Cluster.Replicas)
}
