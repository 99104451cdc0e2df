package consumer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ensureAttempt bounds one pass of Ensure: a JetStream API request that a
// forming cluster dropped (a meta leader elected a moment ago, routes not
// yet carrying the account's interest) is given up and asked again, rather
// than waited on until the caller's own deadline.
const ensureAttempt = 10 * time.Second

// EnsureRetrying is Ensure for a daemon starting beside its NATS servers:
// a pass that fails for a reason time cures (a request timed out,
// JetStream answered 503 "temporarily unavailable") is tried
// again with backoff until within is spent or ctx ends; onRetry (may be
// nil) hears each such failure and the wait before the next pass. Anything
// else (a *ReplicasMismatchError, a refused stream definition, no
// JetStream behind the connection: no responders) returns at once, as
// does the pass that ctx ended.
func EnsureRetrying(ctx context.Context, js jetstream.JetStream, c Config, within time.Duration, onRetry func(err error, wait time.Duration)) (jetstream.Consumer, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	pass := func() (jetstream.Consumer, error) {
		actx, cancel := context.WithTimeout(ctx, ensureAttempt)
		defer cancel()
		cons, err := Ensure(actx, js, c)
		if err == nil {
			return cons, nil
		}
		if ctx.Err() != nil || !ensureTransient(err) {
			return nil, backoff.Permanent(err)
		}
		return nil, err
	}
	notify := func(err error, wait time.Duration) {
		if onRetry != nil {
			onRetry(err, wait)
		}
	}
	cons, err := backoff.Retry(ctx, pass, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(within), backoff.WithNotify(notify))
	if err != nil {
		if ctx.Err() == nil && ensureTransient(err) {
			return nil, fmt.Errorf("%w (still failing after %s of retries)", err, within)
		}
		return nil, err
	}
	return cons, nil
}

// errCodeClusterNoPeers is JetStream's "no suitable peers for placement"
// (10005): a cluster that has elected its meta leader before the other
// nodes' peer records reached it answers this for a replicated stream.
// nats.go names no constant for it.
const errCodeClusterNoPeers jetstream.ErrorCode = 10005

// ensureTransient tells the failures of a JetStream that is not ready yet
// from those of a configuration it refuses. "No suitable peers" is both:
// a forming cluster says it until its nodes know each other, and a cluster
// too small for the replicas asked says it for ever. It is retried, so a
// cluster that never grows fails at the end of the set-up's budget, naming
// the error (a loaded machine showed the forming case: nodes that started
// but had not yet shared their peer records).
func ensureTransient(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == http.StatusServiceUnavailable || apiErr.ErrorCode == errCodeClusterNoPeers
	}
	return false
}
