package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
)

// streamsStartWait bounds how long start-up waits for JetStream to answer
// the stream and consumer set-up.
const streamsStartWait = 2 * time.Minute

// ensureStreams checks nats.replicas against the servers behind nc, then
// creates or checks the streams and the durable consumer. A replica count
// the cluster cannot hold, or a stream that exists with another one, is a
// configuration error (exit 78); R1 streams on a cluster are logged as a
// warning. A JetStream that is still forming (a request timed out, a 503
// "temporarily unavailable") is asked again for up to streamsStartWait.
func ensureStreams(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, c Config, log *slog.Logger) (jetstream.Consumer, error) {
	chk, err := consumer.CheckCluster(ctx, nc, c.NATS.Config)
	if err != nil {
		var above *consumer.ReplicasAboveClusterError
		if errors.As(err, &above) {
			return nil, configError(err)
		}
		return nil, err
	}
	if chk.Cluster != "" {
		log.Info("nats: cluster", "cluster", chk.Cluster, "servers", chk.Servers, "stream_replicas", c.NATS.Replicas)
	}
	if chk.Warning != "" {
		log.Warn(chk.Warning)
	}
	cons, err := consumer.EnsureRetrying(ctx, js, c.NATS.Config, streamsStartWait, func(err error, wait time.Duration) {
		log.Warn("nats: streams not ready yet; trying again", "error", err.Error(), "retry_in", wait.Round(time.Millisecond).String())
	})
	var mismatch *consumer.ReplicasMismatchError
	if errors.As(err, &mismatch) {
		return nil, configError(err)
	}
	return cons, err
}

// commandStreams connects to nats.url (never the embedded server) and makes
// sure the streams exist, for a front door that publishes commands a daemon
// elsewhere takes: nothing is accepted before the commands stream can hold
// it. stop closes the connection.
func commandStreams(ctx context.Context, c Config, log *slog.Logger) (nc *nats.Conn, js jetstream.JetStream, stop func(), err error) {
	nc, js, stop, _, err = natsConn(c, log, false)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := ensureStreams(ctx, nc, js, c, log); err != nil {
		stop()
		return nil, nil, nil, err
	}
	return nc, js, stop, nil
}
