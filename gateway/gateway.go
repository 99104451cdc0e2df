package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
)

// Config tunes the gateway. Zero fields take the documented defaults.
type Config struct {
	// Env is the daemon's environment, the first part of every key. Required;
	// it must be the daemon's, or keys will not match.
	Env string `mapstructure:"-"`
	// Wait bounds how long a call waits for a final outcome before it answers
	// pending with the operation key. Default CoverWait(CallTimeout): a call
	// and the lookup of its lost answer, at most MaxWait.
	Wait time.Duration `mapstructure:"wait"`
	// MaxWait caps the wait a caller may ask for (HTTP Prefer: wait=N).
	// Default 60s.
	MaxWait time.Duration `mapstructure:"max_wait"`
	// PollAfter is retry_after_ms of a pending answer. Default 1s.
	PollAfter time.Duration `mapstructure:"poll_after"`
	// PublishTimeout bounds handing a command to JetStream. Default 5s.
	PublishTimeout time.Duration `mapstructure:"publish_timeout"`
	// ReviewAfter is the reconciler's review_after: an unknown operation with
	// this many unsettled lookups is unresolved. Default
	// answer.DefaultReviewAfter.
	ReviewAfter int `mapstructure:"-"`
	// IdleAfter is the reconciler's idle_after: a retryable failure untouched
	// this long is unresolved (the agent must resend it). Default
	// answer.DefaultIdleAfter.
	IdleAfter time.Duration `mapstructure:"-"`
	// MaxSize is the largest command envelope accepted, as the daemon's
	// decoder. Default operation.DefaultMaxSize (64 KiB).
	MaxSize int `mapstructure:"-"`
	// CallTimeout is the daemon's worker.call_timeout, the bound of one call
	// to a target; the default Wait is derived from it. Default 10s (the
	// worker's default).
	CallTimeout time.Duration `mapstructure:"-"`
	// TaskTTL is how long a task handed out (StartTask) stays recorded in
	// the tasks bucket; the journal row answers for it after that, until the
	// janitor's retention. Default 24h.
	TaskTTL time.Duration `mapstructure:"task_ttl"`
	// TaskReplicas is the tasks bucket's replicas: the daemon's
	// nats.replicas, so that a task outlives a NATS node as its command
	// does. Default 1.
	TaskReplicas int `mapstructure:"-"`
}

// lookupSlack is what a lost answer's lookup needs beyond its own call:
// the unknown outcome recorded, the command's return, its claim, the
// completion and the result's way back.
const lookupSlack = 2 * time.Second

// CoverWait is the wait that covers a call and the lookup of its answer
// when it is lost, each bounded by callTimeout: a call answered pending
// just before its lookup settles it would send the agent polling for
// nothing.
func CoverWait(callTimeout time.Duration) time.Duration { return 2*callTimeout + lookupSlack }

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.MaxWait == 0 {
		c.MaxWait = time.Minute
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 10 * time.Second
	}
	if c.Wait == 0 {
		c.Wait = min(CoverWait(c.CallTimeout), c.MaxWait)
	}
	if c.PollAfter == 0 {
		c.PollAfter = time.Second
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 5 * time.Second
	}
	th := c.Thresholds().WithDefaults()
	c.ReviewAfter, c.IdleAfter = th.ReviewAfter, th.IdleAfter
	if c.MaxSize == 0 {
		c.MaxSize = operation.DefaultMaxSize
	}
	if c.TaskTTL == 0 {
		c.TaskTTL = 24 * time.Hour
	}
	return c
}

// Thresholds are the answers' thresholds this configuration sets.
func (c Config) Thresholds() answer.Thresholds {
	return answer.Thresholds{PollAfter: c.PollAfter, ReviewAfter: c.ReviewAfter, IdleAfter: c.IdleAfter}
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
	if c.TaskTTL < time.Minute {
		errs = append(errs, fmt.Errorf("gateway.task_ttl %v: at least 1m", c.TaskTTL))
	}
	if c.ReviewAfter < 1 || c.IdleAfter <= 0 || c.MaxSize < 0 {
		errs = append(errs, errors.New("gateway: review_after, idle_after must be positive"))
	}
	return errors.Join(errs...)
}

// Journal is what the gateway reads of the daemon's journal: an operation,
// its attempts and the field digests of its first request (on a conflict),
// and the lists an agent reviews. The gateway writes nothing there; both
// engines' journal.Store satisfies it.
type Journal interface {
	Get(ctx context.Context, key string) (journal.Record, error)
	Attempts(ctx context.Context, key string) ([]journal.Attempt, error)
	FieldDigests(ctx context.Context, key string) (string, error)
	ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error)
	ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error)
	// Approval reads the approval record of an intent that waits for a
	// person (its wait's end and the approvals given so far).
	Approval(ctx context.Context, key string) (journal.Approval, error)
}

// Deps are what the gateway works with.
type Deps struct {
	// NC reaches the NATS server the daemon consumes from. Required.
	NC *nats.Conn
	// ResultsStream is the results stream's name ("" for the default).
	ResultsStream string
	// Journal is the daemon's journal, read only. Required.
	Journal Journal
	// Registry holds the operation types; nil means the built-in ones. It
	// must be the daemon's.
	Registry *operation.Registry
	// Routed names the operation types the daemon has an adapter for (the
	// keys of its routes). The faces offer only these, and a call of any
	// other registered type is answered at once that no adapter serves it
	// here, never published to wait for a replica that will not come. Nil:
	// every registered type (a gateway that does not know the routes).
	Routed []string
	// Processes are the declared processes the faces offer (the daemon's;
	// nil: none). Their commands are submitted as operation
	// "process.<name>" (process.go).
	Processes *process.Set
	// Cancels, when set, lets CancelTask cancel an operation no worker has
	// claimed yet: the one write the gateway makes in the journal, through
	// journal.CancelUnclaimed (the daemon's journal.Store satisfies it).
	// Nil: tasks are never cancelled.
	Cancels journal.Claimer
	// ApprovalURL, when set, is the link of an intent's approval page (the
	// daemon's approvals.base_url / url), carried in the answer of an
	// intent that waits for a person. Nil: no link.
	ApprovalURL func(key string) string
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
	procs *process.Set
	// routed holds the types an adapter serves; nil: every registered one.
	routed map[string]bool
	dec    *operation.Decoder
	nc     *nats.Conn
	prod   *producer.Client
	store  Journal
	// approvalURL links an intent's approval page (Deps.ApprovalURL).
	approvalURL func(string) string
	// cancels is the journal writer of CancelTask (nil: none).
	cancels journal.Claimer
	log     *slog.Logger
	now     func() time.Time

	// inbox is the prefix of this gateway's reply subjects: one wildcard
	// subscription serves every waiting call.
	inbox string
	sub   *nats.Subscription
	seq   atomic.Uint64

	// sent remembers keys this gateway published lately, so that a lookup
	// of one the daemon has not claimed yet answers "queued", not "unknown".
	sent recent

	// tasksKV is the tasks bucket once found or made.
	tasksMu sync.Mutex
	tasksKV jetstream.KeyValue

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
		cfg: cfg, rules: cfg.Thresholds(),
		reg: d.Registry, procs: d.Processes, dec: &operation.Decoder{Env: cfg.Env, Registry: d.Registry, MaxSize: cfg.MaxSize},
		nc: d.NC, prod: prod, store: d.Journal, approvalURL: d.ApprovalURL, cancels: d.Cancels, log: d.Log, now: d.Now,
		inbox: d.NC.NewInbox(), done: make(chan struct{}), replies: map[string]chan operation.Result{}, watches: map[string]*watch{},
	}
	if d.Routed != nil {
		g.routed = make(map[string]bool, len(d.Routed))
		for _, name := range d.Routed {
			if _, ok := d.Registry.Lookup(name); !ok {
				return nil, fmt.Errorf("gateway: routed operation %q is not registered", name)
			}
			g.routed[name] = true
		}
		if len(g.routed) == 0 {
			d.Log.Warn("gateway: no operation type is routed to an adapter here, so none is offered (see routes: in the config)")
		}
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

// Types returns the operation types this deployment serves (registered and
// routed to an adapter; see Deps.Routed), sorted by name: the faces build
// one tool or route per type from them.
func (g *Gateway) Types() []operation.Type {
	names := g.reg.Names()
	out := make([]operation.Type, 0, len(names))
	for _, n := range names {
		if t, ok := g.reg.Lookup(n); ok && g.serves(n) {
			out = append(out, t)
		}
	}
	return out
}

// Known reports whether name is a registered operation type, served here
// or not: a face passes a known type's call to Submit, which answers an
// unrouted one itself.
func (g *Gateway) Known(name string) bool {
	_, ok := g.reg.Lookup(name)
	return ok || g.knownProcess(name)
}

// serves reports whether an adapter serves the registered type name here.
func (g *Gateway) serves(name string) bool { return g.routed == nil || g.routed[name] }

// notRouted is the answer to a call of a registered type no adapter serves
// on this deployment: nothing is published (no replica here would take
// it), and calling again cannot help until a person routes the type.
func (g *Gateway) notRouted(opType, intentID string) Answer {
	key, _ := g.KeyFor(opType, intentID)
	return g.rules.NotRouted(key, opType)
}

// CodeNotRouted is the error code of a call of an operation type no adapter
// serves on this deployment.
const CodeNotRouted = answer.CodeNotRouted
