// The naive journal: the lost-response run's baseline, the shape of a key
// table without lookup-before-retry (a River or DBOS style job that records
// the key, then calls).

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/testkit/rawbaseline"
	"github.com/idemgate/idemgate/operation"
)

// naiveTries bounds the calls of one command; each lost answer is retried.
const naiveTries = 10

// naiveRun is the lost-response run done by a naive journal in this
// process, against a fresh stage with the same faults as the daemon's run:
// -raw-loops fetch loops, each command of a batch in its own goroutine:
// INSERT … ON CONFLICT DO NOTHING on the key; on a fresh key, call the
// target (a lost answer is retried at once, without looking up) and store
// the answer; on a known key, read the stored answer (none yet: nak, it is
// in progress elsewhere); publish the result; ack on its PubAck. Each call
// carries a fresh Idempotence-Key, as YooKassa's SDKs make one per request
// when none is given: the retry of a lost answer is a second payment, which
// the emulator's ledger counts (r.duplicates) and which does not fail the run.
func (b *bench) naiveRun(n, intents int, lostRate float64) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	st, err := b.freshStage(ctx, "naive", n, intents, lostRate)
	if err != nil {
		return result{}, err
	}
	pcfg, err := pgxpool.ParseConfig(st.url)
	if err != nil {
		return result{}, err
	}
	pcfg.MaxConns = int32(b.cfg.naiveConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE naive_journal (key text PRIMARY KEY, object text, response text)`); err != nil {
		return result{}, err
	}
	elapsed, _, err := b.runLoops(ctx, st, n, func(t target) loop {
		return &naiveLoop{target: t, b: b, cons: st.cons, ncfg: st.ncfg, pool: pool,
			acks: make(chan rawbaseline.Ack, 4*st.ncfg.FetchBatch)}
	})
	if err != nil {
		return result{}, err
	}
	r := result{commands: n, elapsed: elapsed}
	if got := b.sb.TotalEffects(); got != intents {
		r.duplicates = got - intents
	}
	return r, nil
}

// naiveLoop is one fetch loop of the naive journal.
type naiveLoop struct {
	target
	b    *bench
	cons jetstream.Consumer
	ncfg consumer.Config
	pool *pgxpool.Pool
	acks chan rawbaseline.Ack
}

// Run fetches and handles batches until ctx ends; a goroutine acks each
// command as its result's PubAck arrives.
func (l *naiveLoop) Run(ctx context.Context) error {
	ackErr := make(chan error, 1)
	go func() { ackErr <- rawbaseline.AckEach(l.acks, nil) }()
	err := l.fetchLoop(ctx)
	close(l.acks)
	if aerr := <-ackErr; err == nil {
		err = aerr
	}
	return err
}

func (l *naiveLoop) fetchLoop(ctx context.Context) error {
	for ctx.Err() == nil {
		batch, err := l.cons.Fetch(l.ncfg.FetchBatch, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
		)
		for m := range batch.Messages() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := l.handle(ctx, m); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if first != nil {
			if ctx.Err() != nil {
				return nil
			}
			return first
		}
	}
	return nil
}

// handle is one command, start to publish.
func (l *naiveLoop) handle(ctx context.Context, m jetstream.Msg) error {
	var cmd operation.Command
	if err := json.Unmarshal(m.Data(), &cmd); err != nil {
		return err
	}
	key := rawbaseline.KeyOf(env, &cmd)
	tag, err := l.pool.Exec(ctx, `INSERT INTO naive_journal (key) VALUES ($1) ON CONFLICT DO NOTHING`, key)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	var object, answer string
	found := tag.RowsAffected() == 0
	if found {
		var o, a *string
		if err := l.pool.QueryRow(ctx, `SELECT object, response FROM naive_journal WHERE key = $1`, key).Scan(&o, &a); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if a == nil {
			// In progress in another goroutine: JetStream redelivers it.
			return m.NakWithDelay(100 * time.Millisecond)
		}
		object, answer = *o, *a
	} else {
		for try := 1; ; try++ {
			// No lookup before a retry, and a fresh key per request.
			object, answer, err = l.post(ctx, key, &cmd, uuid.NewString())
			if err == nil || try == naiveTries || ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %d calls: %w", key, naiveTries, err)
		}
		if _, err := l.pool.Exec(ctx, `UPDATE naive_journal SET object = $2, response = $3 WHERE key = $1`, key, object, answer); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	res := operation.Result{OperationKey: key, EventID: cmd.EventID, Operation: cmd.Operation,
		Status: operation.ResultSucceeded, TargetSystem: "payments", TargetObjectID: object,
		Result: json.RawMessage(answer), Attempts: 1, Replayed: found}
	msg, err := consumer.ResultMsg(res)
	if err != nil {
		return err
	}
	fut, err := l.b.js.PublishMsgAsync(msg)
	if err != nil {
		return err
	}
	l.acks <- rawbaseline.Ack{Msg: m, Fut: fut}
	return nil
}
