package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/wire"
)

// Config tunes the gateway. Zero fields take the documented defaults.
type Config struct {
	// Env is the daemon's environment, the first part of every key. Required;
	// it must be the daemon's, or keys will not match.
	Env string `mapstructure:"-"`
	// Wait bounds how long a call waits for a final outcome before it answers
	// pending with the operation key. Default 10s.
	Wait time.Duration `mapstructure:"wait"`
	// MaxWait caps the wait a caller may ask for (HTTP Prefer: wait=N).
	// Default 60s.
	MaxWait time.Duration `mapstructure:"max_wait"`
	// PollAfter is retry_after_ms of a pending answer. Default 1s.
	PollAfter time.Duration `mapstructure:"poll_after"`
	// PublishTimeout bounds handing a command to JetStream. Default 5s.
	PublishTimeout time.Duration `mapstructure:"publish_timeout"`
	// ReviewAfter is the reconciler's review_after: an unknown operation with
	// this many unsettled lookups needs a person. Default 5.
	ReviewAfter int `mapstructure:"-"`
	// IdleAfter is the reconciler's idle_after: a retryable failure untouched
	// this long must be resent by the agent. Default 1h.
	IdleAfter time.Duration `mapstructure:"-"`
	// MaxSize is the largest command envelope accepted, as the daemon's
	// decoder. Default operation.DefaultMaxSize (64 KiB).
	MaxSize int `mapstructure:"-"`
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Wait == 0 {
		c.Wait = 10 * time.Second
	}
	if c.MaxWait == 0 {
		c.MaxWait = time.Minute
	}
	if c.PollAfter == 0 {
		c.PollAfter = time.Second
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 5 * time.Second
	}
	if c.ReviewAfter == 0 {
		c.ReviewAfter = 5
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = time.Hour
	}
	if c.MaxSize == 0 {
		c.MaxSize = operation.DefaultMaxSize
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if err := operation.ValidateEnv(c.Env); err != nil {
		errs = append(errs, fmt.Errorf("gateway env: %w", err))
	}
	if c.Wait <= 0 || c.MaxWait < c.Wait {
		errs = append(errs, fmt.Errorf("gateway.wait %v and max_wait %v: wait must be positive and at most max_wait", c.Wait, c.MaxWait))
	}
	if c.PollAfter <= 0 || c.PublishTimeout <= 0 {
		errs = append(errs, errors.New("gateway.poll_after and publish_timeout must be positive"))
	}
	if c.ReviewAfter < 1 || c.IdleAfter <= 0 || c.MaxSize < 0 {
		errs = append(errs, errors.New("gateway: review_after, idle_after must be positive"))
	}
	return errors.Join(errs...)
}

// Deps are what the gateway works with.
type Deps struct {
	// NC reaches the NATS server the daemon consumes from. Required.
	NC *nats.Conn
	// ResultsStream is the results stream's name ("" for the default).
	ResultsStream string
	// Journal is the daemon's journal, read only. Required.
	Journal journal.Store
	// Registry holds the operation types; nil means the built-in ones. It
	// must be the daemon's.
	Registry *operation.Registry
	// Log receives the gateway's own failures; never payloads.
	Log *slog.Logger
	// Now is the clock (idle retries are judged by it). Default time.Now.
	Now func() time.Time
}

// Gateway submits commands and answers with their outcome. It is safe for
// concurrent use.
type Gateway struct {
	cfg   Config
	rules rules
	reg   *operation.Registry
	dec   *operation.Decoder
	nc    *nats.Conn
	prod  *producer.Client
	store journal.Store
	log   *slog.Logger
	now   func() time.Time

	// inbox is the prefix of this gateway's reply subjects: one wildcard
	// subscription serves every waiting call.
	inbox string
	sub   *nats.Subscription
	seq   atomic.Uint64

	// sent remembers keys this gateway published lately, so that a lookup
	// of one the daemon has not claimed yet answers "queued", not "unknown".
	sent recent

	mu      sync.Mutex
	closed  bool
	done    chan struct{}                    // closed by Close: waiting calls answer pending
	replies map[string]chan operation.Result // reply token → the call waiting on it
	watches map[string]*watch                // operation type → results watch
}

// watch follows the results subject of one operation type for calls whose
// command JetStream dropped as a duplicate: the daemon answers the original,
// not them.
type watch struct {
	sub  *nats.Subscription
	keys map[string]map[chan operation.Result]struct{}
	n    int
}

// New returns a gateway subscribed to its reply subjects; Close releases it.
func New(cfg Config, d Deps) (*Gateway, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.NC == nil || d.Journal == nil {
		return nil, errors.New("gateway: a NATS connection and the journal are required")
	}
	if d.Registry == nil {
		d.Registry = operation.DefaultRegistry()
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	prod, err := producer.New(d.NC, d.ResultsStream)
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg: cfg, rules: rules{pollAfter: cfg.PollAfter, reviewAfter: cfg.ReviewAfter, idleAfter: cfg.IdleAfter},
		reg: d.Registry, dec: &operation.Decoder{Env: cfg.Env, Registry: d.Registry, MaxSize: cfg.MaxSize},
		nc: d.NC, prod: prod, store: d.Journal, log: d.Log, now: d.Now,
		inbox: d.NC.NewInbox(), done: make(chan struct{}), replies: map[string]chan operation.Result{}, watches: map[string]*watch{},
	}
	g.sub, err = d.NC.Subscribe(g.inbox+".*", g.onReply)
	if err != nil {
		return nil, fmt.Errorf("gateway: subscribe to replies: %w", err)
	}
	return g, nil
}

// Close unsubscribes; calls still waiting answer pending. Safe twice.
func (g *Gateway) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	close(g.done)
	_ = g.sub.Unsubscribe()
	for _, w := range g.watches {
		_ = w.sub.Unsubscribe()
	}
	g.watches = map[string]*watch{}
}

// Env returns the environment keys are made in.
func (g *Gateway) Env() string { return g.cfg.Env }

// Config returns the configuration in effect (defaults filled).
func (g *Gateway) Config() Config { return g.cfg }

// Types returns the registered operation types, sorted by name: the faces
// build one tool or route per type from them.
func (g *Gateway) Types() []operation.Type {
	names := g.reg.Names()
	out := make([]operation.Type, 0, len(names))
	for _, n := range names {
		if t, ok := g.reg.Lookup(n); ok {
			out = append(out, t)
		}
	}
	return out
}

// Request is one call of an operation.
type Request struct {
	// Operation is the registered operation type, e.g. "payment.charge".
	Operation string
	// IntentID names the business intent: one per intent, reused on every
	// retry, never one per attempt.
	IntentID string
	// ApprovalID approves a money-moving operation; stored, not fingerprinted.
	ApprovalID string
	// Payload holds the operation's fields, a JSON object.
	Payload json.RawMessage
	// Wait bounds the wait for the outcome; 0 means Config.Wait. Capped at
	// Config.MaxWait.
	Wait time.Duration
}

// MsgID is the Nats-Msg-Id of a command the gateway publishes: the
// operation key and the fingerprint. A retry with the same payload is the
// same message, which the stream's duplicate window drops; a changed
// payload is another message, which reaches the daemon to be answered
// conflict.
func MsgID(op operation.Operation) string { return op.Key.String() + "#" + op.Fingerprint }

// Submit publishes the command for req and waits, up to the bound, for its
// outcome. It always answers: failures to hand the command over are an
// unavailable answer, never an error.
func (g *Gateway) Submit(ctx context.Context, req Request) Answer {
	if req.IntentID == "" {
		return g.rules.rejected("", req.Operation, string(operation.CodeMissingField),
			"intent_id: required: one intent_id per business intent, reused on every retry")
	}
	cmd := operation.Command{EventID: req.IntentID, Operation: req.Operation, IntentID: req.IntentID,
		ApprovalID: req.ApprovalID, Payload: req.Payload}
	op, err := g.dec.DecodeCommand(cmd)
	if err != nil {
		var de *operation.DecodeError
		if !errors.As(err, &de) {
			g.log.Error("gateway: decoder misconfigured", "error", err.Error())
			return g.rules.unavailable("", req.Operation, "check the command")
		}
		return g.rules.rejected(de.Key, de.Operation, string(de.Code), decodeReason(de))
	}
	key := op.Key.String()
	token, replies := g.await()
	defer g.forget(token)

	pctx, cancel := context.WithTimeout(ctx, g.cfg.PublishTimeout)
	ack, err := g.prod.PublishWith(pctx, cmd, producer.PublishOptions{MsgID: MsgID(op), ReplyTo: g.inbox + "." + token})
	cancel()
	if err != nil {
		g.log.Warn("gateway: command not handed to JetStream", "operation_key", key, "error", err.Error())
		return g.rules.unavailable(key, op.Type, "hand the command to JetStream")
	}
	g.sent.add(key, g.now())
	timer := time.NewTimer(g.waitFor(req.Wait))
	defer timer.Stop()

	var watched chan operation.Result
	if ack.Duplicate {
		// The daemon answers the original message, not this copy: follow
		// the results of the key, then read the journal (a result published
		// before the watch began is already there).
		ch, stop, err := g.watchKey(op.Type, key)
		if err != nil {
			g.log.Warn("gateway: results watch failed", "operation_key", key, "error", err.Error())
		} else {
			defer stop()
			watched = ch
		}
		if a, ok := g.settled(ctx, op, true); ok {
			return a
		}
	}
	for {
		select {
		case r := <-replies:
			if r.Status == operation.ResultPending || r.OperationKey != key {
				continue
			}
			return g.rules.fromResult(r)
		case <-watched:
			// Any result for the key, maybe answering another request's
			// payload: the journal row says what it means for this one.
			if a, ok := g.settled(ctx, op, true); ok {
				return a
			}
		case <-timer.C:
			return g.pendingAnswer(ctx, op, ack.Duplicate)
		case <-ctx.Done():
			return g.rules.fromResult(operation.Result{OperationKey: key, Operation: op.Type,
				Status: operation.ResultPending, TargetSystem: op.TargetSystem})
		case <-g.done:
			return g.rules.fromResult(operation.Result{OperationKey: key, Operation: op.Type,
				Status: operation.ResultPending, TargetSystem: op.TargetSystem})
		}
	}
}

// waitFor is the bound of one call.
func (g *Gateway) waitFor(asked time.Duration) time.Duration {
	if asked <= 0 {
		return g.cfg.Wait
	}
	return min(asked, g.cfg.MaxWait)
}

// settled answers from the journal row when it settles the call: a final
// row with this request's fingerprint, or a row with another (a conflict).
func (g *Gateway) settled(ctx context.Context, op operation.Operation, replayed bool) (Answer, bool) {
	rec, err := g.store.Get(ctx, op.Key.String())
	if err != nil {
		if !errors.Is(err, journal.ErrNotFound) && ctx.Err() == nil {
			g.log.Warn("gateway: journal read failed", "operation_key", op.Key.String(), "error", err.Error())
		}
		return Answer{}, false
	}
	if rec.RequestHash != op.Fingerprint {
		return g.rules.conflictFrom(rec, g.conflictFields(ctx, op)), true
	}
	if !rec.Status.Terminal() {
		return Answer{}, false
	}
	res := resultOf(rec)
	res.Replayed = replayed
	return g.rules.fromResult(res), true
}

// conflictFields names the fields of op that differ from the key's first
// request, by the digests the journal stored with it.
func (g *Gateway) conflictFields(ctx context.Context, op operation.Operation) []string {
	stored, err := g.store.FieldDigests(ctx, op.Key.String())
	if err != nil {
		g.log.Warn("gateway: field digests not read", "operation_key", op.Key.String(), "error", err.Error())
		return nil
	}
	return operation.ConflictFields(stored, op.FieldDigests())
}

// pendingAnswer is the answer when the bound passed: the journal row's
// story when there is one (an unknown outcome past review needs a person),
// else "queued".
func (g *Gateway) pendingAnswer(ctx context.Context, op operation.Operation, duplicate bool) Answer {
	key := op.Key.String()
	rec, err := g.store.Get(ctx, key)
	switch {
	case err == nil && rec.RequestHash != op.Fingerprint:
		return g.rules.conflictFrom(rec, g.conflictFields(ctx, op))
	case err == nil && rec.Status.Terminal():
		// Settled just now: its result is on the way.
		return g.rules.fromResult(resultWith(rec, duplicate))
	case err == nil:
		a := g.rules.fromRecord(rec, g.now())
		a.JournalStatus = ""
		return a
	}
	return g.queued(key, op.Type, op.TargetSystem)
}

// queued is the answer for a command published but not claimed yet.
func (g *Gateway) queued(key, opType, target string) Answer {
	a := g.rules.fromResult(operation.Result{OperationKey: key, Operation: opType,
		Status: operation.ResultPending, TargetSystem: target})
	a.Reason = strings.Replace(a.Reason, "the target is being called or its answer looked up", "the command is queued for the daemon", 1)
	return a
}

func resultWith(rec journal.Record, replayed bool) operation.Result {
	r := resultOf(rec)
	r.Replayed = replayed
	return r
}

// decodeReason names the field the way the caller sent it: the gateway
// sends the intent as the event id too.
func decodeReason(de *operation.DecodeError) string {
	field := de.Field
	if field == "event_id" {
		field = "intent_id"
	}
	msg := strings.ReplaceAll(de.Msg, "event_id", "intent_id")
	if field == "" {
		return string(de.Code) + ": " + msg
	}
	return field + ": " + msg
}

// await registers a call waiting on its own reply subject.
func (g *Gateway) await() (string, chan operation.Result) {
	token := strconv.FormatUint(g.seq.Add(1), 36)
	ch := make(chan operation.Result, 8)
	g.mu.Lock()
	g.replies[token] = ch
	g.mu.Unlock()
	return token, ch
}

func (g *Gateway) forget(token string) {
	g.mu.Lock()
	delete(g.replies, token)
	g.mu.Unlock()
}

// onReply hands a result sent to a reply subject to the call waiting on it.
func (g *Gateway) onReply(m *nats.Msg) {
	token := m.Subject[len(g.inbox)+1:]
	g.mu.Lock()
	ch := g.replies[token]
	g.mu.Unlock()
	if ch == nil {
		return
	}
	var r operation.Result
	if json.Unmarshal(m.Data, &r) != nil {
		return
	}
	select {
	case ch <- r:
	default: // pending results filled it; a final one still has room below
		if r.Status != operation.ResultPending {
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- r:
			default:
			}
		}
	}
}

// watchKey follows the results of one key; stop ends it.
func (g *Gateway) watchKey(opType, key string) (chan operation.Result, func(), error) {
	ch := make(chan operation.Result, 1)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, errors.New("gateway closed")
	}
	w := g.watches[opType]
	if w == nil {
		w = &watch{keys: map[string]map[chan operation.Result]struct{}{}}
		sub, err := g.nc.Subscribe(wire.ResultSubject(opType), func(m *nats.Msg) { g.onWatched(opType, m) })
		if err != nil {
			g.mu.Unlock()
			return nil, nil, err
		}
		w.sub = sub
		g.watches[opType] = w
	}
	if w.keys[key] == nil {
		w.keys[key] = map[chan operation.Result]struct{}{}
	}
	w.keys[key][ch] = struct{}{}
	w.n++
	g.mu.Unlock()
	stop := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(w.keys[key], ch)
		if len(w.keys[key]) == 0 {
			delete(w.keys, key)
		}
		w.n--
		if w.n == 0 && g.watches[opType] == w {
			delete(g.watches, opType)
			_ = w.sub.Unsubscribe()
		}
	}
	// The subscription must be in place at the server before the journal
	// is read, or a result published in between would be missed.
	if err := g.nc.Flush(); err != nil {
		stop()
		return nil, nil, err
	}
	return ch, stop, nil
}

// onWatched wakes the calls following a result's key.
func (g *Gateway) onWatched(opType string, m *nats.Msg) {
	key := m.Header.Get(wire.HeaderOperationKey)
	var r operation.Result
	if key == "" {
		if json.Unmarshal(m.Data, &r) != nil {
			return
		}
		key = r.OperationKey
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.watches[opType]
	if w == nil {
		return
	}
	for ch := range w.keys[key] {
		select {
		case ch <- r:
		default:
		}
	}
}

// Lookup answers from the journal for an operation key; trail adds the
// attempts trail. Read only.
func (g *Gateway) Lookup(ctx context.Context, key string, trail bool) Answer {
	k, err := operation.ParseKey(key)
	if err != nil {
		reason := err.Error()
		var ke *operation.KeyError
		if errors.As(err, &ke) {
			reason = ke.Reason
		}
		return g.rules.rejected("", "", string(operation.CodeBadKey), "operation_key: "+reason)
	}
	rec, err := g.store.Get(ctx, key)
	if errors.Is(err, journal.ErrNotFound) {
		if g.sent.has(key, g.now()) {
			return g.queued(key, k.Operation, "")
		}
		return g.rules.notFound(key, k.Operation)
	}
	if err != nil {
		g.log.Warn("gateway: journal read failed", "operation_key", key, "error", err.Error())
		return g.rules.unavailable(key, k.Operation, "read the journal")
	}
	a := g.rules.fromRecord(rec, g.now())
	if trail {
		atts, err := g.store.Attempts(ctx, key)
		if err != nil {
			g.log.Warn("gateway: attempts read failed", "operation_key", key, "error", err.Error())
		}
		a.Trail = steps(atts)
	}
	return a
}

// KeyFor derives the operation key of an intent, as the daemon does.
func (g *Gateway) KeyFor(opType, intentID string) (string, error) {
	k, err := operation.DeriveKey(g.cfg.Env, operation.Command{EventID: intentID, Operation: opType, IntentID: intentID}, g.reg)
	if err != nil {
		return "", err
	}
	return k.String(), nil
}

// LookupIntent answers from the journal for an operation type and intent id.
func (g *Gateway) LookupIntent(ctx context.Context, opType, intentID string, trail bool) Answer {
	key, err := g.KeyFor(opType, intentID)
	if err != nil {
		var de *operation.DecodeError
		if errors.As(err, &de) {
			return g.rules.rejected("", opType, string(de.Code), decodeReason(de))
		}
		return g.rules.rejected("", opType, string(operation.CodeBadKey), err.Error())
	}
	return g.Lookup(ctx, key, trail)
}

// Unresolved lists what a person or the agent must act on: unknown
// operations lookups could not settle (human_review) and retryable
// failures no delivery is retrying (retry_same_intent), up to limit of each.
func (g *Gateway) Unresolved(ctx context.Context, limit int) ([]Answer, error) {
	if limit <= 0 {
		limit = 100
	}
	unknown, err := g.store.ListUnresolved(ctx, g.cfg.ReviewAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	idle, err := g.store.ListIdleRetryable(ctx, g.cfg.IdleAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("list idle retries: %w", err)
	}
	now := g.now()
	out := make([]Answer, 0, len(unknown)+len(idle))
	for _, rec := range slices.Concat(unknown, idle) {
		out = append(out, g.rules.fromRecord(rec, now))
	}
	return out, nil
}

// maxSteps bounds the trail in an answer: the newest are kept.
const maxSteps = 20

func steps(atts []journal.Attempt) []Step {
	if len(atts) > maxSteps {
		atts = atts[len(atts)-maxSteps:]
	}
	out := make([]Step, 0, len(atts))
	for _, a := range atts {
		out = append(out, Step{Attempt: a.Attempt, Kind: a.Kind, Outcome: string(a.Outcome), ErrorCode: a.ErrorCode,
			Note: a.Note, StartedAt: a.StartedAt.UTC(), FinishedAt: a.FinishedAt.UTC()})
	}
	return out
}
