package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/testkit/rawbaseline"
	"github.com/idemgate/idemgate/operation"
)

// The lean loop: the least durable work the guarantee needs on the happy
// path, written by hand — a JetStream fetch, one pipelined round trip that
// claims the batch's new keys (one multi-row INSERT … ON CONFLICT DO
// NOTHING) and reads the others' rows, one keep-alive POST per new key, one
// multi-row UPDATE completing them, an asynchronous publish of each result
// and an ack on its PubAck. Its journal is a row per key with status,
// fingerprint, result and a lease: no attempts trail, no fencing columns
// beyond the lease, no spans, no metrics. It is the limit the daemon is
// measured against (the raw baseline does the daemon's own SQL by hand).

const leanSchema = `
CREATE TABLE lean_journal (
    key          text PRIMARY KEY,
    request_hash text NOT NULL,
    status       text NOT NULL,
    object_id    text,
    result       text,
    lease_owner  text,
    lease_until  timestamptz
)`

const (
	leanClaim = `
INSERT INTO lean_journal (key, request_hash, status, lease_owner, lease_until)
SELECT k, h, 'started', $3, now() + interval '30 seconds' FROM unnest($1::text[], $2::text[]) AS t(k, h)
ON CONFLICT (key) DO NOTHING
RETURNING key`
	leanRead     = `SELECT key, status, coalesce(object_id, ''), coalesce(result, '') FROM lean_journal WHERE key = ANY($1)`
	leanComplete = `
UPDATE lean_journal j SET status = 'succeeded', object_id = t.o, result = t.r, lease_until = NULL
FROM unnest($1::text[], $2::text[], $3::text[]) AS t(k, o, r)
WHERE j.key = t.k AND j.status = 'started'`
)

// leanRun is the lean loop's run, on a fresh stage like the others.
func (b *bench) leanRun() (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	intents := b.cfg.commands * 4 / 5
	st, err := b.freshStage(ctx, "lean", b.cfg.commands, intents, 0)
	if err != nil {
		return result{}, err
	}
	pool, err := pgxpool.New(ctx, st.url)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, leanSchema); err != nil {
		return result{}, err
	}
	elapsed, shares, err := b.runLoops(ctx, st, b.cfg.commands, func(t target) loop {
		return &leanLoop{cons: st.cons, js: b.js, pool: pool, batch: st.ncfg.FetchBatch, call: t, acks: make(chan rawbaseline.Ack, 4*st.ncfg.FetchBatch)}
	})
	if err != nil {
		return result{}, err
	}
	r := result{commands: b.cfg.commands, elapsed: elapsed, shares: shares}
	if got := b.sb.TotalEffects(); got != intents {
		r.duplicates = got - intents
		return r, fmt.Errorf("%d payments for %d intents", got, intents)
	}
	return r, nil
}

type leanLoop struct {
	cons  jetstream.Consumer
	js    jetstream.JetStream
	pool  *pgxpool.Pool
	batch int
	call  target
	acks  chan rawbaseline.Ack
}

type leanCmd struct {
	msg                   jetstream.Msg
	cmd                   operation.Command
	key, hash             string
	claimed, later        bool // claimed here; its key is in flight elsewhere (redelivered)
	status, object, value string
	err                   error
}

func (l *leanLoop) Run(ctx context.Context) error {
	ackErr := make(chan error, 1)
	go func() { ackErr <- rawbaseline.AckEach(l.acks, nil) }()
	err := l.fetchLoop(ctx)
	close(l.acks)
	if aerr := <-ackErr; err == nil {
		err = aerr
	}
	return err
}

func (l *leanLoop) fetchLoop(ctx context.Context) error {
	for ctx.Err() == nil {
		batch, err := l.cons.Fetch(l.batch, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var cmds []*leanCmd
		for m := range batch.Messages() {
			cmds = append(cmds, &leanCmd{msg: m})
		}
		if len(cmds) == 0 {
			continue
		}
		if err := l.handle(ctx, cmds); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

func (l *leanLoop) handle(ctx context.Context, cmds []*leanCmd) error {
	byKey := map[string]*leanCmd{}
	for _, c := range cmds {
		if err := json.Unmarshal(c.msg.Data(), &c.cmd); err != nil {
			return err
		}
		c.key = rawbaseline.KeyOf(env, &c.cmd)
		sum := sha256.Sum256(c.cmd.Payload)
		c.hash = hex.EncodeToString(sum[:])
		if byKey[c.key] != nil {
			c.later = true // twice in one batch: the copy comes again
			continue
		}
		byKey[c.key] = c
	}
	keys := slices.Sorted(maps.Keys(byKey)) // one lock order for every batch
	hashes := make([]string, len(keys))
	for i, k := range keys {
		hashes[i] = byKey[k].hash
	}
	// One round trip: claim the new keys, read every key's row.
	b := &pgx.Batch{}
	b.Queue(leanClaim, keys, hashes, owner)
	b.Queue(leanRead, keys)
	br := l.pool.SendBatch(ctx, b)
	rows, _ := br.Query()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			br.Close()
			return err
		}
		byKey[k].claimed = true
	}
	if err := rows.Err(); err != nil {
		br.Close()
		return err
	}
	rows, _ = br.Query()
	for rows.Next() {
		var k, status, object, value string
		if err := rows.Scan(&k, &status, &object, &value); err != nil {
			br.Close()
			return err
		}
		if c := byKey[k]; !c.claimed {
			c.status, c.object, c.value = status, object, value
		}
	}
	if err := rows.Err(); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	// The new keys' calls at once, on kept-alive connections.
	var wg sync.WaitGroup
	for _, c := range byKey {
		if c.claimed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.object, c.value, c.err = l.call.post(ctx, c.key, &c.cmd, c.key)
			}()
		}
	}
	wg.Wait()
	var ck, co, cr []string
	for _, c := range byKey {
		if c.claimed {
			if c.err != nil {
				return fmt.Errorf("%s: %w", c.key, c.err)
			}
			ck, co, cr = append(ck, c.key), append(co, c.object), append(cr, c.value)
		}
	}
	if len(ck) > 0 {
		if _, err := l.pool.Exec(ctx, leanComplete, ck, co, cr); err != nil {
			return err
		}
	}
	for _, c := range cmds {
		first := byKey[c.key]
		if c.later || (!first.claimed && first.status != "succeeded") {
			_ = c.msg.NakWithDelay(100 * time.Millisecond) // in flight elsewhere: comes again
			continue
		}
		res := operation.Result{OperationKey: c.key, EventID: c.cmd.EventID, Operation: c.cmd.Operation,
			Status: operation.ResultSucceeded, TargetSystem: "payments", TargetObjectID: first.object,
			Result: json.RawMessage(first.value), Replayed: !first.claimed}
		m, err := consumer.ResultMsg(res)
		if err != nil {
			return err
		}
		fut, err := l.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		l.acks <- rawbaseline.Ack{Msg: c.msg, Fut: fut}
	}
	return nil
}
