package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
)

// TestCheckClusterSingleServer: a server that is not clustered holds one
// replica; asking for more is refused before any stream is touched, and R1
// draws no warning.
func TestCheckClusterSingleServer(t *testing.T) {
	ns := natstest.Start(t)
	nc, _ := ns.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	chk, err := CheckCluster(ctx, nc, Config{Replicas: 1}.WithDefaults())
	require.NoError(t, err)
	require.Empty(t, chk.Cluster)
	require.Empty(t, chk.Warning)

	_, err = CheckCluster(ctx, nc, Config{Replicas: 3}.WithDefaults())
	var above *ReplicasAboveClusterError
	require.ErrorAs(t, err, &above)
	require.Contains(t, err.Error(), "nats.replicas 3: the NATS server is not clustered")
}

// TestCheckClusterThreeNodes: on a 3-node cluster, five replicas are
// refused, one draws the R1 warning, three create streams whose every
// replica is placed; a later start asking for another replica count is
// told so plainly, and the streams keep theirs.
func TestCheckClusterThreeNodes(t *testing.T) {
	cl := natstest.StartCluster(t, 3)
	nc, err := nats.Connect(cl.URLs())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	_, err = CheckCluster(ctx, nc, Config{Replicas: 5}.WithDefaults())
	var above *ReplicasAboveClusterError
	require.ErrorAs(t, err, &above)
	require.Equal(t, 3, above.Servers)
	require.Contains(t, err.Error(), `nats.replicas 5: NATS cluster "idemgate" has 3 servers`)

	chk, err := CheckCluster(ctx, nc, Config{Replicas: 1}.WithDefaults())
	require.NoError(t, err)
	require.Equal(t, "idemgate", chk.Cluster)
	require.Contains(t, chk.Warning, "nats.replicas is 1")

	c := Config{Replicas: 3}.WithDefaults()
	chk, err = CheckCluster(ctx, nc, c)
	require.NoError(t, err)
	require.Empty(t, chk.Warning)
	_, err = Ensure(ctx, js, c)
	require.NoError(t, err)
	for _, name := range []string{c.CommandsStream, c.ResultsStream} {
		st, err := js.Stream(ctx, name)
		require.NoError(t, err)
		info := st.CachedInfo()
		require.Equal(t, 3, info.Config.Replicas, name)
		require.NotNil(t, info.Cluster, name)
		require.NotEmpty(t, info.Cluster.Leader, name)
		require.Len(t, info.Cluster.Replicas, 2, "%s: the leader and two followers", name)
	}

	r1 := Config{Replicas: 1}.WithDefaults()
	_, err = Ensure(ctx, js, r1)
	var mismatch *ReplicasMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.Equal(t, ReplicasMismatchError{Stream: c.CommandsStream, Have: 3, Want: 1}, *mismatch)
	require.Contains(t, err.Error(), "stream IDEMGATE_COMMANDS exists with 3 replica(s) but nats.replicas is 1")
	st, err := js.Stream(ctx, c.CommandsStream)
	require.NoError(t, err)
	require.Equal(t, 3, st.CachedInfo().Config.Replicas, "the stream keeps its replicas")
}

// TestCheckClusterNoAdvertise: a cluster that does not advertise its
// servers shows a client only the one it was given. Three replicas are then
// refused while nothing proves them, and accepted once the commands stream
// exists on three servers (created through a URL listing them all).
func TestCheckClusterNoAdvertise(t *testing.T) {
	cl := natstest.StartCluster(t, 3, func(o *server.Options) { o.Cluster.NoAdvertise = true })
	one, err := nats.Connect(cl.Servers[0].ClientURL())
	require.NoError(t, err)
	t.Cleanup(one.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := Config{Replicas: 3}.WithDefaults()

	_, err = CheckCluster(ctx, one, c)
	var above *ReplicasAboveClusterError
	require.ErrorAs(t, err, &above)
	require.Equal(t, 1, above.Servers)

	all, err := nats.Connect(cl.URLs())
	require.NoError(t, err)
	t.Cleanup(all.Close)
	js, err := jetstream.New(all)
	require.NoError(t, err)
	_, err = Ensure(ctx, js, c)
	require.NoError(t, err)

	chk, err := CheckCluster(ctx, one, c)
	require.NoError(t, err)
	require.Equal(t, 3, chk.Servers, "the stream's placement proves three servers")
}
