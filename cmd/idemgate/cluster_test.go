package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/consumer/natstest"
)

// TestReplicasAboveClusterExit78: nats.replicas above what the NATS
// servers can hold stops the daemon with exit 78 (a restart would not
// help), for the embedded single server and for a 3-node cluster.
func TestReplicasAboveClusterExit78(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--config", writeConfig(t, fmt.Sprintf(
		"env: test\ndata_dir: %q\nadmin: {addr: ''}\nnats: {embedded_addr: 127.0.0.1:0, replicas: 3}\n", t.TempDir()))},
		&bytes.Buffer{}, &stderr)
	require.Equal(t, exitConfig, code, stderr.String())
	require.Contains(t, stderr.String(), "nats.replicas 3: the NATS server is not clustered")

	cl := natstest.StartCluster(t, 3)
	stderr.Reset()
	code = run(context.Background(), []string{"run", "--config", writeConfig(t, fmt.Sprintf(
		"env: test\ndata_dir: %q\nadmin: {addr: ''}\nnats: {url: %q, replicas: 5}\n", t.TempDir(), cl.URLs()))},
		&bytes.Buffer{}, &stderr)
	require.Equal(t, exitConfig, code, stderr.String())
	require.Contains(t, stderr.String(), `nats.replicas 5: NATS cluster "idemgate" has 3 servers`)
}

// TestClusterReplicasAtStartUp: on a 3-node cluster, R1 streams start with
// a warning; a later start with nats.replicas 3 finds the R1 streams and
// refuses (exit 78) with both counts and the way to rescale.
func TestClusterReplicasAtStartUp(t *testing.T) {
	cl := natstest.StartCluster(t, 3)
	cfg := func(replicas int) Config {
		c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, fmt.Sprintf(
			"env: test\ndata_dir: %q\nadmin: {addr: ''}\nlog: {format: text}\nnats: {url: %q, replicas: %d}\n",
			t.TempDir(), cl.URLs(), replicas))))
		require.NoError(t, err)
		require.NoError(t, c.validate())
		return c
	}
	c := cfg(1)
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	err := runDaemon(runCtx, c, newLogger(c, &logs), func(*daemon) { stop() })
	require.NoError(t, err)
	require.Contains(t, logs.String(), "nats.replicas is 1: each stream lives on one node")

	var stderr bytes.Buffer
	code := run(ctx, []string{"run", "--config", writeConfig(t, fmt.Sprintf(
		"env: test\ndata_dir: %q\nadmin: {addr: ''}\nnats: {url: %q, replicas: 3}\n", t.TempDir(), cl.URLs()))},
		&bytes.Buffer{}, &stderr)
	require.Equal(t, exitConfig, code, stderr.String())
	require.Contains(t, stderr.String(), "stream IDEMGATE_COMMANDS exists with 1 replica(s) but nats.replicas is 3")
	require.Contains(t, stderr.String(), "nats stream edit IDEMGATE_COMMANDS --replicas 3")
}
