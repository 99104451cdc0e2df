package consumer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/operation"
)

// RouterConfig tunes a Router.
type RouterConfig struct {
	// MaxInFlight bounds deliveries held at once (fetched, not yet settled).
	MaxInFlight int
	// Handlers is how many fetched batches are handled concurrently.
	Handlers int
	// PendingEvery is how often the consumer's pending counts are read for
	// Hooks.Pending (a consumer info request, off the delivery path); 0:
	// never.
	PendingEvery time.Duration
}

// Hooks let the owner of a Router count what it does. Nil hooks are skipped.
type Hooks struct {
	// Fetched is called with the size of each non-empty fetch.
	Fetched func(n int)
	// Settled is called once per delivery with the time from its fetch to
	// its ack, nak or term.
	Settled func(time.Duration)
	// SettledTraced replaces Settled for a delivery whose span recorded,
	// with its trace id (for an exemplar).
	SettledTraced func(d time.Duration, traceID string)
	// Published is called for each result JetStream acknowledged.
	Published func(operation.ResultStatus)
	// PublishFailed is called for each result JetStream did not
	// acknowledge (an error or no PubAck in time).
	PublishFailed func()
	// Requeued is called for each command requeued on its last delivery.
	Requeued func()
	// GivenUp is called for each command given up with no result: older
	// than nats.commands_max_age on its last delivery, or its requeue
	// failed.
	GivenUp func()
	// Pending is called every PendingEvery with the consumer's commands not
	// yet delivered and delivered but not yet acknowledged (all replicas).
	Pending func(undelivered, ackPending uint64)
}

// Router moves commands between JetStream and a handler: it fetches whole
// batches into in-flight slots, hands each batch to the handler, publishes
// the results the handler hands back and settles each delivery (ack, nak,
// term) only once JetStream has acknowledged its result. The handler
// decides; the Router owns acknowledgement.
type Router struct {
	cfg   Config
	rc    RouterConfig
	cons  jetstream.Consumer
	js    jetstream.JetStream
	nc    *nats.Conn
	log   *slog.Logger
	hooks Hooks

	slots    chan struct{}
	batches  chan []*Delivery
	inflight sync.WaitGroup
	// busy counts the deliveries handed on and not settled yet.
	busy atomic.Int64
	// held: the fetched groups with a delivery not yet settled, oldest
	// first (OldestHeld); under heldMu.
	heldMu  sync.Mutex
	held    []*heldGroup
	pubAcks chan pubWait // results published, oldest first

	startOnce, stopOnce, closeOnce sync.Once
	stopFetch                      context.CancelFunc
	stopPoll                       context.CancelFunc
	fetchDone, handleDone, ackDone chan struct{}
	pollDone                       chan struct{}
}

// NewRouter builds a router over cons (ensured with cfg) that publishes
// results on js, and replies on nc (nil: no replies).
func NewRouter(cfg Config, rc RouterConfig, cons jetstream.Consumer, js jetstream.JetStream, nc *nats.Conn, log *slog.Logger, hooks Hooks) *Router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rc.MaxInFlight = max(rc.MaxInFlight, 1)
	rc.Handlers = max(rc.Handlers, 1)
	return &Router{cfg: cfg, rc: rc, cons: cons, js: js, nc: nc, log: log, hooks: hooks,
		slots:   make(chan struct{}, rc.MaxInFlight),
		batches: make(chan []*Delivery, rc.Handlers),
		pubAcks: make(chan pubWait, rc.MaxInFlight),
	}
}

// Start begins fetching: handle is called with each fetched batch, from up
// to Handlers goroutines at once. Every delivery handed to it must be
// settled exactly once (Answer, AnswerThenNak, Reject or Nak), from any
// goroutine. Fetching ends when ctx ends or at StopFetching.
func (r *Router) Start(ctx context.Context, handle func([]*Delivery)) {
	r.startOnce.Do(func() {
		fetchCtx, stop := context.WithCancel(ctx)
		r.stopFetch = stop
		r.fetchDone, r.handleDone, r.ackDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
		go r.ackLoop()
		go r.fetchLoop(fetchCtx)
		var handlers sync.WaitGroup
		for range r.rc.Handlers {
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				for b := range r.batches {
					handle(b)
				}
			}()
		}
		go func() { handlers.Wait(); close(r.handleDone) }()
		if r.rc.PendingEvery > 0 && r.hooks.Pending != nil {
			pollCtx, stopPoll := context.WithCancel(context.WithoutCancel(ctx))
			r.stopPoll, r.pollDone = stopPoll, make(chan struct{})
			go r.pollPending(pollCtx)
		}
	})
}

// StopFetching stops fetching and returns once every fetched batch has been
// handed to the handler and the handler has returned. Safe to call twice.
func (r *Router) StopFetching() {
	r.stopOnce.Do(func() {
		if r.stopFetch == nil {
			return
		}
		r.stopFetch()
		<-r.fetchDone
		<-r.handleDone
	})
}

// Drain waits until every fetched delivery is settled, or ctx ends (its
// error is returned then).
func (r *Router) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends publishing and polling. Call it after StopFetching, once every
// delivery is settled (Drain): nothing may publish afterwards. Safe to call
// twice.
func (r *Router) Close() {
	r.closeOnce.Do(func() {
		if r.ackDone == nil {
			return
		}
		close(r.pubAcks)
		<-r.ackDone
		if r.stopPoll != nil {
			r.stopPoll()
			<-r.pollDone
		}
	})
}

// fetchLoop pulls batches: it waits until a batch's worth of in-flight
// slots is free. Fetching whatever few slots were just freed would split the
// stream into small batches, each costing a claim round trip of its own.
//
// A fetch stays open until its batch is full or FetchWait passes, but what
// it brings is handed on as it arrives: a group closes once no command has
// followed its last one for fetchLinger, or at once when the last one says
// the stream holds nothing more for the consumer (its NumPending) and no
// earlier delivery is still being worked on. Commands the server has at hand
// arrive back to back and make one group; a lone command (a redelivery
// after a short delay, the first command after a quiet spell) is handled at
// once instead of waiting out the open fetch. Stopping still waits for an
// open fetch to end (at most FetchWait) and hands on what it brings: the
// server would deliver into the void what a fetch abandoned early still
// brings, and those commands would wait out AckWait.
func (r *Router) fetchLoop(ctx context.Context) {
	defer close(r.fetchDone)
	defer close(r.batches)
	size := min(r.cfg.FetchBatch, r.rc.MaxInFlight)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for ctx.Err() == nil {
		for n := 0; n < size; n++ {
			select {
			case r.slots <- struct{}{}:
			case <-ctx.Done():
				r.release(n)
				return
			}
		}
		n := size
		batch, err := r.cons.Fetch(n, jetstream.FetchMaxWait(r.cfg.FetchWait))
		if err != nil {
			r.release(n)
			r.log.Warn("fetch failed", "error", err.Error())
			ctxsleep.For(ctx, time.Second)
			continue
		}
		got := 0
		group := make([]jetstream.Msg, 0, n)
		flush := func() {
			if len(group) > 0 {
				r.handOn(group)
				got += len(group)
				group = make([]jetstream.Msg, 0, n-got)
			}
		}
		msgs := batch.Messages()
		for open := true; open; {
			var m jetstream.Msg
			select {
			case m, open = <-msgs:
			case <-linger.C:
				flush()
				continue
			}
			if !open {
				break
			}
			group = append(group, m)
			if r.lone(m) {
				// Nothing else waits in the stream for this consumer and
				// nothing is being worked on: a lone command (one agent
				// waiting for its call) does not wait out a window that
				// only helps a burst. Under load the linger groups what
				// arrives close together into one claim.
				linger.Stop()
				flush()
				continue
			}
			if len(group) == 1 {
				linger.Reset(fetchLinger)
			}
		}
		linger.Stop()
		flush()
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			r.log.Debug("fetch ended", "error", err.Error())
		}
		r.release(n - got)
	}
}

// lone reports that m is a lone command: nothing is being worked on here
// (checked first: it costs no parsing) and its metadata says the stream
// holds nothing more for the consumer.
func (r *Router) lone(m jetstream.Msg) bool {
	if r.busy.Load() != 0 {
		return false
	}
	md, err := m.Metadata()
	return err == nil && md.NumPending == 0
}

// fetchLinger is how long a group of fetched commands waits for one more
// before it is handed on (fetchLoop).
const fetchLinger = 2 * time.Millisecond

// handOn makes deliveries of msgs and queues them for the handlers.
func (r *Router) handOn(msgs []jetstream.Msg) {
	at := time.Now()
	if r.hooks.Fetched != nil {
		r.hooks.Fetched(len(msgs))
	}
	r.inflight.Add(len(msgs))
	r.busy.Add(int64(len(msgs)))
	g := &heldGroup{at: at, left: len(msgs)}
	r.heldMu.Lock()
	r.held = append(r.held, g)
	r.heldMu.Unlock()
	// One allocation for the group's deliveries.
	ds := make([]Delivery, len(msgs))
	out := make([]*Delivery, len(msgs))
	for i, m := range msgs {
		ds[i] = Delivery{r: r, msg: m, fetchedAt: at, span: startDeliverySpan(m), group: g}
		out[i] = &ds[i]
	}
	r.batches <- out
}

func (r *Router) release(n int) {
	for range n {
		<-r.slots
	}
}

// settled releases a delivery's slot; every fetched delivery passes here once.
func (r *Router) settled(d *Delivery) {
	traceID := d.endSpan()
	switch {
	case traceID != "" && r.hooks.SettledTraced != nil:
		r.hooks.SettledTraced(time.Since(d.fetchedAt), traceID)
	case r.hooks.Settled != nil:
		r.hooks.Settled(time.Since(d.fetchedAt))
	}
	<-r.slots
	r.busy.Add(-1)
	r.unhold(d.group)
	if d.onSettled != nil {
		d.onSettled()
	}
	r.inflight.Done()
}

// heldGroup is a fetched group of deliveries: when it was fetched and how
// many of them are not settled yet.
type heldGroup struct {
	at   time.Time
	left int
}

// unhold counts a settled delivery of g, and forgets the oldest groups
// once all theirs are settled (and every settled group once many are kept
// behind one that is not).
func (r *Router) unhold(g *heldGroup) {
	if g == nil {
		return
	}
	r.heldMu.Lock()
	g.left--
	for len(r.held) > 0 && r.held[0].left <= 0 {
		r.held[0] = nil
		r.held = r.held[1:]
	}
	if len(r.held) > 64 {
		r.held = slices.DeleteFunc(r.held, func(h *heldGroup) bool { return h.left <= 0 })
	}
	r.heldMu.Unlock()
}

// OldestHeld is how long the oldest delivery not yet settled has been held
// since its fetch (0 when none is).
func (r *Router) OldestHeld() time.Duration {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	for _, g := range r.held {
		if g.left > 0 {
			return time.Since(g.at)
		}
	}
	return 0
}

func (r *Router) publishFailed() {
	if r.hooks.PublishFailed != nil {
		r.hooks.PublishFailed()
	}
}

func (r *Router) published(status operation.ResultStatus) {
	if r.hooks.Published != nil {
		r.hooks.Published(status)
	}
}

// pollPending reads the consumer's pending counts every PendingEvery.
func (r *Router) pollPending(ctx context.Context) {
	defer close(r.pollDone)
	t := time.NewTicker(r.rc.PendingEvery)
	defer t.Stop()
	for {
		ictx, cancel := context.WithTimeout(ctx, r.rc.PendingEvery)
		info, err := r.cons.Info(ictx)
		cancel()
		if err == nil {
			r.hooks.Pending(info.NumPending, uint64(info.NumAckPending))
		} else if ctx.Err() == nil {
			r.log.Debug("consumer info failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
