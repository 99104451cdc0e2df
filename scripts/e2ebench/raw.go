package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
)

// rawRun is the baseline: the daemon's work by hand, in this process.
func (b *bench) rawRun() (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	intents := b.cfg.commands * 4 / 5
	st, err := b.freshStage(ctx, "raw", b.cfg.commands, intents, 0)
	if err != nil {
		return result{}, err
	}
	pool, err := pgxpool.New(ctx, st.url)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	elapsed, err := b.runLoops(ctx, st, b.cfg.commands, func(l rawLoop) loop {
		l.pool = pool
		return &l
	})
	if err != nil {
		return result{}, err
	}
	r := result{commands: b.cfg.commands, elapsed: elapsed}
	if got := b.sb.TotalEffects(); got != intents {
		r.duplicates = got - intents
		return r, fmt.Errorf("%d payments for %d intents", got, intents)
	}
	return r, nil
}

// stage is a fresh stage and its commands consumer.
type stage struct {
	url  string
	cons jetstream.Consumer
	ncfg consumer.Config
}

// freshStage makes a fresh stage named name (n commands for intents),
// with its commands consumer,
// and, with lostRate > 0, loses that share of the emulator's answers after
// the payment is made.
func (b *bench) freshStage(ctx context.Context, name string, n, intents int, lostRate float64) (stage, error) {
	st := stage{ncfg: consumer.Config{}.WithDefaults()}
	url, err := b.prepare(ctx, name, n, intents, st.ncfg)
	if err != nil {
		return stage{}, err
	}
	st.url = url
	if st.cons, err = b.js.Consumer(ctx, st.ncfg.CommandsStream, st.ncfg.Durable); err != nil {
		return stage{}, err
	}
	if lostRate > 0 {
		if err := b.sb.InjectFault(sandbox.Fault{Kind: sandbox.FaultLoseResponseClose, Rate: lostRate}); err != nil {
			return stage{}, err
		}
	}
	return st, nil
}

// loop is one of the in-process loops: it runs until ctx ends.
type loop interface {
	run(ctx context.Context) error
}

// runLoops runs -raw-loops loops, each made by mk from a rawLoop holding
// the stage's consumer, a keep-alive HTTP client and the emulator's
// credentials, until n commands are answered; it returns how long that
// took.
func (b *bench) runLoops(ctx context.Context, st stage, n int, mk func(rawLoop) loop) (time.Duration, error) {
	shop, secret := b.sb.Credentials()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var wg sync.WaitGroup
	errs := make(chan error, b.cfg.rawLoops)
	for range b.cfg.rawLoops {
		l := mk(rawLoop{b: b, cons: st.cons, http: client, shop: shop, secret: secret, ncfg: st.ncfg,
			acks: make(chan rawAck, 4*st.ncfg.FetchBatch)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.run(loopCtx); err != nil {
				errs <- err
				stopLoops()
			}
		}()
	}
	elapsed, werr := b.watch(loopCtx, st.cons, n, nil, nil)
	stopLoops()
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return elapsed, werr
}

type rawLoop struct {
	b            *bench
	cons         jetstream.Consumer
	pool         *pgxpool.Pool
	http         *http.Client
	shop, secret string
	ncfg         consumer.Config
	acks         chan rawAck

	cmds  []rawCmd
	order []int
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
	sLive, sEffectPossible                                                          bool
}

type rawCmd struct {
	msg      jetstream.Msg
	cmd      operation.Command
	key      string
	hash     string
	found    bool
	inserted bool
	status   string
	token    int64
	attempts int
	object   string
	result   []byte
	answer   string // the business result of this call
	err      error
}

type rawAck struct {
	msg jetstream.Msg
	fut jetstream.PubAckFuture
}

func (r *rawLoop) run(ctx context.Context) error {
	ackErr := make(chan error, 1)
	go func() { ackErr <- r.ackLoop() }()
	err := r.fetchLoop(ctx)
	close(r.acks)
	if aerr := <-ackErr; err == nil {
		err = aerr
	}
	return err
}

// ackLoop acks each command once its result's PubAck arrives (a nak if the
// publish failed) until acks is closed, and returns the first error.
func (r *rawLoop) ackLoop() error {
	var first error
	for a := range r.acks {
		select {
		case <-a.fut.Ok():
			if err := a.msg.Ack(); err != nil && first == nil {
				first = err
			}
		case err := <-a.fut.Err():
			_ = a.msg.Nak()
			if first == nil {
				first = err
			}
		}
	}
	return first
}

func (r *rawLoop) fetchLoop(ctx context.Context) error {
	for ctx.Err() == nil {
		batch, err := r.cons.Fetch(r.ncfg.FetchBatch, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		r.cmds = r.cmds[:0]
		for m := range batch.Messages() {
			r.cmds = append(r.cmds, rawCmd{msg: m})
		}
		if len(r.cmds) == 0 {
			continue
		}
		if err := r.handle(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

func (r *rawLoop) handle(ctx context.Context) error {
	for i := range r.cmds {
		c := &r.cmds[i]
		if err := json.Unmarshal(c.msg.Data(), &c.cmd); err != nil {
			return err
		}
		c.key, c.hash = keyOf(&c.cmd), hashOf(c.cmd.Payload)
	}
	r.order = r.order[:0]
	for i := range r.cmds {
		r.order = append(r.order, i)
	}
	slices.SortFunc(r.order, func(a, b int) int { return strings.Compare(r.cmds[a].key, r.cmds[b].key) })
	// A key twice in one batch (a redelivered repeat beside a later one):
	// the second copy waits for a redelivery, as the daemon's does.
	kept := r.order[:0]
	for _, i := range r.order {
		if len(kept) > 0 && r.cmds[kept[len(kept)-1]].key == r.cmds[i].key {
			r.cmds[i].err = errInProgress
			continue
		}
		kept = append(kept, i)
	}
	r.order = kept

	// The plain read decides replays.
	r.keys = r.keys[:0]
	for _, i := range r.order {
		r.keys = append(r.keys, r.cmds[i].key)
	}
	rows, _ := r.pool.Query(ctx, r.b.q.SelectRecords, r.keys)
	if err := r.scanRecords(rows, true); err != nil {
		return fmt.Errorf("read: %w", err)
	}

	r.keys, r.types, r.hashes, r.targets = r.keys[:0], r.types[:0], r.hashes[:0], r.targets[:0]
	r.events, r.approvals, r.owners, r.ttls, r.digests = r.events[:0], r.approvals[:0], r.owners[:0], r.ttls[:0], r.digests[:0]
	for _, i := range r.order {
		c := &r.cmds[i]
		if c.found {
			if c.status != "succeeded" {
				// A repeat whose first copy is still in another loop's batch:
				// JetStream redelivers it later, as it would to the daemon.
				continue
			}
			continue
		}
		r.keys, r.types, r.hashes = append(r.keys, c.key), append(r.types, c.cmd.Operation), append(r.hashes, c.hash)
		r.targets, r.events = append(r.targets, "payments"), append(r.events, c.cmd.EventID)
		r.approvals, r.owners = append(r.approvals, c.cmd.ApprovalID), append(r.owners, owner)
		r.ttls, r.digests = append(r.ttls, (30*time.Second).Milliseconds()), append(r.digests, "")
	}
	if len(r.keys) > 0 {
		if err := r.claim(ctx); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		r.call(ctx)
		if err := r.complete(ctx); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
	}

	for i := range r.cmds {
		c := &r.cmds[i]
		if c.found && c.status != "succeeded" || c.err != nil {
			// In progress elsewhere: JetStream redelivers it.
			_ = c.msg.NakWithDelay(100 * time.Millisecond)
			continue
		}
		res := operation.Result{OperationKey: c.key, EventID: c.cmd.EventID, Operation: c.cmd.Operation,
			Status: operation.ResultSucceeded, TargetSystem: "payments", TargetObjectID: c.object,
			Result: c.result, Attempts: c.attempts, Replayed: c.found}
		if !c.found {
			res.Result = json.RawMessage(c.answer)
		}
		m, err := consumer.ResultMsg(res)
		if err != nil {
			return err
		}
		fut, err := r.b.js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		r.acks <- rawAck{msg: c.msg, fut: fut}
	}
	return nil
}

// call sends the batch's new intents to the emulator at once: the POST the
// YooKassa adapter sends, on kept-alive connections.
func (r *rawLoop) call(ctx context.Context) {
	var wg sync.WaitGroup
	for _, i := range r.order {
		c := &r.cmds[i]
		if c.found || c.err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.object, c.answer, c.err = r.post(ctx, c, c.key)
		}()
	}
	wg.Wait()
}

type payment struct {
	Amount struct {
		Value    string `json:"value"`
		Currency string `json:"currency"`
	} `json:"amount"`
	Capture         bool              `json:"capture"`
	PaymentMethodID string            `json:"payment_method_id"`
	Description     string            `json:"description,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// post makes c's payment under the Idempotence-Key idemKey.
func (r *rawLoop) post(ctx context.Context, c *rawCmd, idemKey string) (object, answer string, err error) {
	var f struct {
		AccountID   string `json:"account_id"`
		OrderID     string `json:"order_id"`
		AmountMinor int64  `json:"amount_minor"`
		Currency    string `json:"currency"`
	}
	if err := json.Unmarshal(c.cmd.Payload, &f); err != nil {
		return "", "", err
	}
	var p payment
	p.Amount.Value = strconv.FormatInt(f.AmountMinor/100, 10) + "." + fmt.Sprintf("%02d", f.AmountMinor%100)
	p.Amount.Currency, p.Capture, p.PaymentMethodID = f.Currency, true, f.AccountID
	p.Description = "Order " + f.OrderID
	p.Metadata = map[string]string{yookassa.MetaKey: c.key, yookassa.MetaOrderID: f.OrderID, yookassa.MetaApprovalID: c.cmd.ApprovalID}
	body, err := json.Marshal(p)
	if err != nil {
		return "", "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.b.sbURL+"/v3/payments", bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.SetBasicAuth(r.shop, r.secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotence-Key", idemKey)
	resp, err := r.http.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var o struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Amount struct {
			Value    string `json:"value"`
			Currency string `json:"currency"`
		} `json:"amount"`
		Paid bool `json:"paid"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return "", "", err
	}
	out, err := json.Marshal(map[string]any{"business_status": o.Status, "amount_minor": f.AmountMinor, "currency": o.Amount.Currency, "paid": o.Paid})
	return o.ID, string(out), err
}

func (r *rawLoop) claim(ctx context.Context) error {
	b := &pgx.Batch{}
	b.Queue(r.b.q.ClaimInsert, r.keys, r.types, r.hashes, r.targets, r.events, r.approvals, r.owners, r.ttls, r.digests)
	b.Queue(r.b.q.ClaimTakeOver, r.keys, r.hashes, r.owners, r.ttls)
	b.Queue(r.b.q.SelectRecords, r.keys)
	br := r.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, _ := br.Query()
	for rows.Next() {
		if err := rows.Scan(&r.sKey); err != nil {
			return err
		}
		j := r.find(r.sKey)
		if j < 0 {
			return fmt.Errorf("inserted %s, which the batch did not send", r.sKey)
		}
		r.cmds[j].inserted = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, _ = br.Query()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, _ = br.Query()
	if err := r.scanRecords(rows, false); err != nil {
		return err
	}
	// A key another loop's batch inserted first (a repeat close behind its
	// first copy) is in progress there: redelivered later, as the daemon
	// does.
	for _, i := range r.order {
		if c := &r.cmds[i]; !c.found && !c.inserted {
			c.err = errInProgress
		}
	}
	return br.Close()
}

// find is the index in r.cmds of the command with key, or -1.
func (r *rawLoop) find(key string) int {
	j, ok := slices.BinarySearchFunc(r.order, key, func(i int, k string) int { return strings.Compare(r.cmds[i].key, k) })
	if !ok {
		return -1
	}
	return r.order[j]
}

var errInProgress = errors.New("in progress in another batch")

func (r *rawLoop) scanRecords(rows pgx.Rows, read bool) error {
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&r.sKey, &r.sType, &r.sHash, &r.sStatus, &r.sTarget,
			&r.sObject, &r.sResult, &r.sCode, &r.sAttempts,
			&r.sEvent, &r.sApproval, &r.sOwner, &r.sToken, &r.sLeaseUntil,
			&r.sRounds, &r.sCreated, &r.sUpdated, &r.sCompleted,
			&r.sRoundsTotal, &r.sRaisedAt, &r.sEffectPossible, &r.sLive, &r.sNow); err != nil {
			return err
		}
		j := r.find(r.sKey)
		if j < 0 {
			return fmt.Errorf("a row for %s, which the batch did not send", r.sKey)
		}
		c := &r.cmds[j]
		c.found = read
		c.status, c.token, c.attempts = r.sStatus, r.sToken, r.sAttempts
		if read {
			c.object, c.result = r.sObject, r.sResult
		}
		r.sResult = nil
	}
	return rows.Err()
}

func (r *rawLoop) complete(ctx context.Context) error {
	r.ckeys, r.tokens, r.statuses, r.objects = r.ckeys[:0], r.tokens[:0], r.statuses[:0], r.objects[:0]
	r.results, r.codes, r.reqIDs, r.notes, r.reconciled = r.results[:0], r.codes[:0], r.reqIDs[:0], r.notes[:0], r.reconciled[:0]
	r.holds = r.holds[:0]
	for _, i := range r.order {
		c := &r.cmds[i]
		if c.found || errors.Is(c.err, errInProgress) {
			continue
		}
		if c.err != nil {
			return fmt.Errorf("%s: %w", c.key, c.err)
		}
		r.ckeys, r.tokens, r.statuses = append(r.ckeys, c.key), append(r.tokens, c.token), append(r.statuses, "succeeded")
		r.objects, r.results = append(r.objects, c.object), append(r.results, &c.answer)
		r.codes, r.reqIDs, r.notes, r.reconciled = append(r.codes, ""), append(r.reqIDs, ""), append(r.notes, ""), append(r.reconciled, false)
		r.holds = append(r.holds, 0)
	}
	rows, _ := r.pool.Query(ctx, r.b.q.Complete, r.ckeys, r.tokens, r.statuses, r.objects,
		r.results, r.codes, r.reqIDs, r.notes, r.reconciled, r.holds)
	applied := 0
	for rows.Next() {
		applied++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if applied != len(r.ckeys) {
		return fmt.Errorf("%d of %d completions applied", applied, len(r.ckeys))
	}
	return nil
}
