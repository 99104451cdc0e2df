// Package rawbaseline is the benchmarks' raw baseline: the daemon's hot path
// written out by hand, with no abstraction. One Loop fetches a batch from
// JetStream, decodes it with encoding/json, claims its new keys with the
// journal's exact SQL (postgres.HotPathSQL: one statement inserting the new
// keys and reading the others), calls the target for each, completes
// with the store's exact statement, publishes each result asynchronously
// and acks each command as its PubAck arrives.
//
// worker's BenchmarkRawBaseline runs it against a no-op target and
// scripts/e2ebench against the YooKassa emulator: one implementation, so
// that the two baselines measure the same work and cannot drift apart.
//
// Test and benchmark machinery: nothing in the daemon imports it.
package rawbaseline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/operation"
)

// Config is what a Loop works with.
type Config struct {
	Consumer jetstream.Consumer
	JS       jetstream.JetStream
	Pool     *pgxpool.Pool
	SQL      postgres.HotPathSQL
	// Env is the daemon's env (keys are derived as it derives them), Owner
	// the claims' lease owner, Target the target system the journal and
	// the results name.
	Env, Owner, Target string
	// FetchBatch and FetchWait are each fetch's size and longest wait.
	FetchBatch int
	FetchWait  time.Duration
	// Call makes a new command's effect under its operation key and
	// returns the target's object id and the result's JSON.
	Call func(ctx context.Context, key string, cmd *operation.Command) (object, result string, err error)
	// Concurrent runs a batch's calls at once, each in a goroutine of its
	// own (a target across the network); otherwise they run inline, one
	// after another.
	Concurrent bool
	// Repeats lets a key come again while its first copy is in flight (twice
	// in one batch, or claimed by another loop first): the copy is nak'd
	// for a redelivery, as the daemon's is. Without it, such a copy is an
	// error: the stage places its repeats further apart.
	Repeats bool
	// Acked, when set, is told each command's fetch time as it is acked.
	Acked func(fetched time.Time)
}

// KeyOf is the operation key the daemon derives from a command in env: its
// intent (the event id when it names none) under the default key version.
func KeyOf(env string, c *operation.Command) string {
	intent := c.IntentID
	if intent == "" {
		intent = c.EventID
	}
	return operation.Key{Env: env, Operation: c.Operation, IntentID: intent, Version: operation.DefaultKeyVersion}.String()
}

// Ack is a command waiting for its result's PubAck.
type Ack struct {
	Msg     jetstream.Msg
	Fut     jetstream.PubAckFuture
	Fetched time.Time
}

// AckEach acks each command once its result's PubAck arrives (a nak if the
// publish failed), telling acked (when set) its fetch time, until acks is
// closed; it returns the first error.
func AckEach(acks <-chan Ack, acked func(fetched time.Time)) error {
	var first error
	for a := range acks {
		select {
		case <-a.Fut.Ok():
			if err := a.Msg.Ack(); err != nil && first == nil {
				first = err
			}
			if acked != nil {
				acked(a.Fetched)
			}
		case err := <-a.Fut.Err():
			_ = a.Msg.Nak()
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Loop is one fetch loop, with its reused argument arrays.
type Loop struct {
	cfg  Config
	acks chan Ack

	cmds  []cmd
	order []int // cmds indexes sorted by key
	// claim arrays
	keys, types, hashes, targets, events, approvals, owners, digests []string
	ttls                                                             []int64
	// complete arrays
	ckeys, statuses, objects, codes, reqIDs, notes []string
	tokens                                         []int64
	results                                        []*string
	reconciled                                     []bool
	holds                                          []int64
	// scan targets
	sKey, sType, sHash, sStatus, sTarget, sObject, sCode, sEvent, sApproval, sOwner string
	sResult                                                                         []byte
	sAttempts, sRounds, sRoundsTotal                                                int
	sToken                                                                          int64
	sLeaseUntil, sCompleted, sRaisedAt                                              *time.Time
	sCreated, sUpdated, sNow                                                        time.Time
	sLive, sEffectPossible, sInserted                                               bool
}

type cmd struct {
	msg       jetstream.Msg
	cmd       operation.Command
	key, hash string
	found     bool // the journal knew the key: a replay
	inserted  bool // this batch's claim inserted the key
	status    string
	token     int64
	attempts  int
	object    string
	result    []byte // a replay's stored result
	answer    string // the result of this batch's call
	err       error
}

// errInProgress marks a copy whose key is in flight elsewhere (Repeats).
var errInProgress = errors.New("in progress in another batch")

// New returns a loop over cfg.
func New(cfg Config) *Loop {
	return &Loop{cfg: cfg, acks: make(chan Ack, 4*cfg.FetchBatch)}
}

// Run fetches and handles batches until ctx ends; a goroutine acks each
// command as its result's PubAck arrives.
func (l *Loop) Run(ctx context.Context) error {
	ackErr := make(chan error, 1)
	go func() { ackErr <- AckEach(l.acks, l.cfg.Acked) }()
	err := l.fetchLoop(ctx)
	close(l.acks)
	if aerr := <-ackErr; err == nil {
		err = aerr
	}
	return err
}

func (l *Loop) fetchLoop(ctx context.Context) error {
	for ctx.Err() == nil {
		batch, err := l.cfg.Consumer.Fetch(l.cfg.FetchBatch, jetstream.FetchMaxWait(l.cfg.FetchWait))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.cmds = l.cmds[:0]
		for m := range batch.Messages() {
			l.cmds = append(l.cmds, cmd{msg: m})
		}
		if len(l.cmds) == 0 {
			continue
		}
		if err := l.handle(ctx, time.Now()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// inFlight is what becomes of a copy whose key is in flight elsewhere: a
// redelivery with Repeats, an error without.
func (l *Loop) inFlight(c *cmd, why string) error {
	if !l.cfg.Repeats {
		return fmt.Errorf("%s: %s: the stage places repeats further apart", c.key, why)
	}
	c.err = errInProgress
	return nil
}

func (l *Loop) handle(ctx context.Context, fetched time.Time) error {
	// Decode: the envelope with encoding/json, the key, the payload's hash.
	for i := range l.cmds {
		c := &l.cmds[i]
		if err := json.Unmarshal(c.msg.Data(), &c.cmd); err != nil {
			return err
		}
		c.key = KeyOf(l.cfg.Env, &c.cmd)
		sum := sha256.Sum256(c.cmd.Payload)
		c.hash = hex.EncodeToString(sum[:])
	}
	l.order = l.order[:0]
	for i := range l.cmds {
		l.order = append(l.order, i)
	}
	slices.SortFunc(l.order, func(a, b int) int { return strings.Compare(l.cmds[a].key, l.cmds[b].key) })
	// A key twice in one batch: the second copy waits for a redelivery, as
	// the daemon's does.
	kept := l.order[:0]
	for _, i := range l.order {
		if len(kept) > 0 && l.cmds[kept[len(kept)-1]].key == l.cmds[i].key {
			if err := l.inFlight(&l.cmds[i], "twice in one batch"); err != nil {
				return err
			}
			continue
		}
		kept = append(kept, i)
	}
	l.order = kept

	// One statement claims the new keys and reads the others (replays).
	l.keys, l.types, l.hashes, l.targets = l.keys[:0], l.types[:0], l.hashes[:0], l.targets[:0]
	l.events, l.approvals, l.owners, l.ttls, l.digests = l.events[:0], l.approvals[:0], l.owners[:0], l.ttls[:0], l.digests[:0]
	for _, i := range l.order {
		c := &l.cmds[i]
		l.keys, l.types, l.hashes = append(l.keys, c.key), append(l.types, c.cmd.Operation), append(l.hashes, c.hash)
		l.targets, l.events = append(l.targets, l.cfg.Target), append(l.events, c.cmd.EventID)
		l.approvals, l.owners = append(l.approvals, c.cmd.ApprovalID), append(l.owners, l.cfg.Owner)
		l.ttls = append(l.ttls, (30 * time.Second).Milliseconds())
		// No per-field digests: the stages' payloads are never conflicts,
		// and the digests are the daemon's own work (stored as NULL).
		l.digests = append(l.digests, "")
	}
	if err := l.claim(ctx); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	l.call(ctx)
	if err := l.complete(ctx); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	return l.publish(fetched)
}

// publish sends every answered command's result; the ack goroutine acks
// each on its PubAck. A copy in flight elsewhere is nak'd: JetStream
// redelivers it.
func (l *Loop) publish(fetched time.Time) error {
	for i := range l.cmds {
		c := &l.cmds[i]
		if c.found && c.status != "succeeded" || c.err != nil {
			_ = c.msg.NakWithDelay(100 * time.Millisecond)
			continue
		}
		res := operation.Result{OperationKey: c.key, EventID: c.cmd.EventID, Operation: c.cmd.Operation,
			Status: operation.ResultSucceeded, TargetSystem: l.cfg.Target, TargetObjectID: c.object,
			Result: c.result, Attempts: c.attempts, Replayed: c.found}
		if !c.found {
			res.Result = json.RawMessage(c.answer)
		}
		m, err := consumer.ResultMsg(res)
		if err != nil {
			return err
		}
		fut, err := l.cfg.JS.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		l.acks <- Ack{Msg: c.msg, Fut: fut, Fetched: fetched}
	}
	return nil
}

// claim sends the store's first claim statement for l.keys: it inserts the
// new keys and reads the others.
func (l *Loop) claim(ctx context.Context) error {
	rows, _ := l.cfg.Pool.Query(ctx, l.cfg.SQL.ClaimFirst, l.keys, l.types, l.hashes, l.targets, l.events, l.approvals, l.owners, l.ttls, l.digests)
	if err := l.scanRecords(rows); err != nil {
		return err
	}
	for _, i := range l.order {
		c := &l.cmds[i]
		switch {
		case c.found && c.status != "succeeded":
			// Its first copy is still in another loop's batch.
			if err := l.inFlight(c, "status "+c.status+", want succeeded"); err != nil {
				return err
			}
		case !c.found && !c.inserted:
			// Inserted by another loop's batch after this statement began.
			if err := l.inFlight(c, "inserted by another batch"); err != nil {
				return err
			}
		}
	}
	return nil
}

// call makes the effects of the batch's claimed commands.
func (l *Loop) call(ctx context.Context) {
	var wg sync.WaitGroup
	for _, i := range l.order {
		c := &l.cmds[i]
		if c.found || c.err != nil {
			continue
		}
		if !l.cfg.Concurrent {
			c.object, c.answer, c.err = l.cfg.Call(ctx, c.key, &c.cmd)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.object, c.answer, c.err = l.cfg.Call(ctx, c.key, &c.cmd)
		}()
	}
	wg.Wait()
}

// find is the index in l.cmds of the command with key, or -1.
func (l *Loop) find(key string) int {
	j, ok := slices.BinarySearchFunc(l.order, key, func(i int, k string) int { return strings.Compare(l.cmds[i].key, k) })
	if !ok {
		return -1
	}
	return l.order[j]
}

// scanRecords reads the first claim statement's rows into the batch's
// commands: inserted ones are claimed, the others found (replays).
func (l *Loop) scanRecords(rows pgx.Rows) error {
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&l.sKey, &l.sType, &l.sHash, &l.sStatus, &l.sTarget,
			&l.sObject, &l.sResult, &l.sCode, &l.sAttempts,
			&l.sEvent, &l.sApproval, &l.sOwner, &l.sToken, &l.sLeaseUntil,
			&l.sRounds, &l.sCreated, &l.sUpdated, &l.sCompleted,
			&l.sRoundsTotal, &l.sRaisedAt, &l.sEffectPossible, &l.sLive, &l.sNow, &l.sInserted); err != nil {
			return err
		}
		j := l.find(l.sKey)
		if j < 0 {
			return fmt.Errorf("a row for %s, which the batch did not send", l.sKey)
		}
		c := &l.cmds[j]
		if c.inserted {
			continue // the same key read from the snapshot: the insert counts
		}
		c.inserted, c.found = l.sInserted, !l.sInserted
		c.status, c.token, c.attempts = l.sStatus, l.sToken, l.sAttempts
		if c.found {
			c.object, c.result = l.sObject, l.sResult
		}
		l.sResult = nil
	}
	return rows.Err()
}

// complete sends the store's completion for the claimed keys.
func (l *Loop) complete(ctx context.Context) error {
	l.ckeys, l.tokens, l.statuses, l.objects = l.ckeys[:0], l.tokens[:0], l.statuses[:0], l.objects[:0]
	l.results, l.codes, l.reqIDs, l.notes, l.reconciled = l.results[:0], l.codes[:0], l.reqIDs[:0], l.notes[:0], l.reconciled[:0]
	l.holds = l.holds[:0]
	for _, i := range l.order {
		c := &l.cmds[i]
		if c.found || errors.Is(c.err, errInProgress) {
			continue
		}
		if c.err != nil {
			return fmt.Errorf("%s: %w", c.key, c.err)
		}
		l.ckeys, l.tokens, l.statuses = append(l.ckeys, c.key), append(l.tokens, c.token), append(l.statuses, "succeeded")
		l.objects, l.results = append(l.objects, c.object), append(l.results, &c.answer)
		l.codes, l.reqIDs, l.notes, l.reconciled = append(l.codes, ""), append(l.reqIDs, ""), append(l.notes, ""), append(l.reconciled, false)
		l.holds = append(l.holds, 0)
	}
	if len(l.ckeys) == 0 {
		return nil
	}
	rows, _ := l.cfg.Pool.Query(ctx, l.cfg.SQL.Complete, l.ckeys, l.tokens, l.statuses, l.objects,
		l.results, l.codes, l.reqIDs, l.notes, l.reconciled, l.holds)
	applied := 0
	for rows.Next() {
		applied++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if applied != len(l.ckeys) {
		return fmt.Errorf("%d of %d completions applied", applied, len(l.ckeys))
	}
	return nil
}
