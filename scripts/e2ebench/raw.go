package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/adapters/yookassa"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/testkit/rawbaseline"
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
	elapsed, shares, err := b.runLoops(ctx, st, b.cfg.commands, func(t target) loop {
		return rawbaseline.New(rawbaseline.Config{
			Consumer: st.cons, JS: b.js, Pool: pool, SQL: b.q,
			Env: env, Owner: owner, Target: "payments",
			FetchBatch: st.ncfg.FetchBatch, FetchWait: 100 * time.Millisecond,
			// The batch's calls at once, on kept-alive connections; a
			// repeat close behind its first copy is redelivered.
			Concurrent: true, Repeats: true,
			Call: func(ctx context.Context, key string, cmd *operation.Command) (string, string, error) {
				return t.post(ctx, key, cmd, key)
			},
		})
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
	Run(ctx context.Context) error
}

// target is the emulator as the loops call it: a keep-alive HTTP client
// and the emulator's credentials.
type target struct {
	url          string
	http         *http.Client
	shop, secret string
}

// runLoops runs -raw-loops loops, each made by mk with the emulator as
// target, until n commands are answered; it returns how long that took
// and every process's CPU meanwhile.
func (b *bench) runLoops(ctx context.Context, st stage, n int, mk func(target) loop) (time.Duration, cpuShares, error) {
	shop, secret := b.sb.Credentials()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	t := target{url: b.sbURL, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, shop: shop, secret: secret}

	loopCtx, stopLoops := context.WithCancel(ctx)
	defer stopLoops()
	var wg sync.WaitGroup
	errs := make(chan error, b.cfg.rawLoops)
	for range b.cfg.rawLoops {
		l := mk(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Run(loopCtx); err != nil {
				errs <- err
				stopLoops()
			}
		}()
	}
	var cpu0 cpuShares
	elapsed, werr := b.watch(loopCtx, st.cons, n, func() { cpu0 = b.cpuNow(0) }, nil)
	shares := b.cpuNow(0).sub(cpu0)
	stopLoops()
	wg.Wait()
	select {
	case err := <-errs:
		return 0, shares, err
	default:
	}
	return elapsed, shares, werr
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

// post makes the payment of cmd, whose operation key is key, under the
// Idempotence-Key idemKey: the POST the YooKassa adapter sends.
func (t target) post(ctx context.Context, key string, cmd *operation.Command, idemKey string) (object, answer string, err error) {
	var f struct {
		AccountID   string `json:"account_id"`
		OrderID     string `json:"order_id"`
		AmountMinor int64  `json:"amount_minor"`
		Currency    string `json:"currency"`
	}
	if err := json.Unmarshal(cmd.Payload, &f); err != nil {
		return "", "", err
	}
	var p payment
	p.Amount.Value = strconv.FormatInt(f.AmountMinor/100, 10) + "." + fmt.Sprintf("%02d", f.AmountMinor%100)
	p.Amount.Currency, p.Capture, p.PaymentMethodID = f.Currency, true, f.AccountID
	p.Description = "Order " + f.OrderID
	p.Metadata = map[string]string{yookassa.MetaKey: key, yookassa.MetaOrderID: f.OrderID, yookassa.MetaApprovalID: cmd.ApprovalID}
	body, err := json.Marshal(p)
	if err != nil {
		return "", "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/v3/payments", bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.SetBasicAuth(t.shop, t.secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotence-Key", idemKey)
	resp, err := t.http.Do(req)
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
