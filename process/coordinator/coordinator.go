package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/producer"
)

// Config tunes the coordinator. Zero fields take the documented defaults.
type Config struct {
	// Owner names this coordinator in process leases (unique per daemon).
	// Required.
	Owner string `mapstructure:"-"`
	// LeaseTTL is the process lease. Default 30s.
	LeaseTTL time.Duration `mapstructure:"lease_ttl"`
	// HeartbeatInterval renews the lease and the command's AckWait.
	// Default (WithConsumer): the lesser of LeaseTTL/3 and the consumer's
	// AckWait/3, so a deployment with a short nats.ack_wait and no
	// processes of its own is never refused for this key.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// StepWait bounds how long one delivery of a process command waits for
	// a step's final outcome before the command comes back later (a step
	// may be held for a retry or a lookup for long). Default 30s.
	StepWait time.Duration `mapstructure:"step_wait"`
	// ComeBack is the delay of a process command sent back to wait. Default 2s.
	ComeBack time.Duration `mapstructure:"come_back"`
	// ApprovalWait is the delay of a process command whose current step
	// waits for a person's approval (approvals:): it is not held for it,
	// and comes back after this to see whether it was decided. Default 1m.
	ApprovalWait time.Duration `mapstructure:"approval_wait"`
	// Poll is how often a waiting step's row is read again when no result
	// wakes the wait. Default 1s.
	Poll time.Duration `mapstructure:"poll"`
	// MaxInFlight bounds the process commands held at once. Default 256.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// ShutdownTimeout bounds the drain at Stop. Default 25s.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.StepWait == 0 {
		c.StepWait = 30 * time.Second
	}
	if c.ComeBack == 0 {
		c.ComeBack = 2 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = time.Second
	}
	if c.ApprovalWait == 0 {
		c.ApprovalWait = time.Minute
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 25 * time.Second
	}
	return c
}

// WithConsumer fills zero fields, the heartbeat from the lease and the
// consumer's AckWait (ncfg with its defaults).
func (c Config) WithConsumer(ncfg consumer.Config) Config {
	c = c.WithDefaults()
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(c.LeaseTTL/3, ncfg.AckWait/3)
	}
	return c
}

// Validate checks the configuration against the consumer's: the lease must
// outlive a heartbeat, and the command's AckWait too.
func (c Config) Validate(ncfg consumer.Config) error {
	var errs []error
	if c.Owner == "" {
		errs = append(errs, errors.New("coordinator: owner is required"))
	}
	if c.LeaseTTL < 100*time.Millisecond || c.HeartbeatInterval <= 0 || c.HeartbeatInterval*2 > c.LeaseTTL {
		errs = append(errs, fmt.Errorf("coordinator.lease_ttl %v and heartbeat_interval %v: the lease must last at least two heartbeats", c.LeaseTTL, c.HeartbeatInterval))
	}
	if c.HeartbeatInterval*2 > ncfg.AckWait {
		errs = append(errs, fmt.Errorf("coordinator.heartbeat_interval %v: at most half of nats.ack_wait %v, or a held process command is redelivered", c.HeartbeatInterval, ncfg.AckWait))
	}
	if c.StepWait <= 0 || c.ComeBack <= 0 || c.ApprovalWait <= 0 || c.Poll <= 0 || c.MaxInFlight < 1 || c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("coordinator: step_wait, come_back, approval_wait, poll, max_in_flight and shutdown_timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Store is what the coordinator needs of the journal: the operations'
// rows (read only) and the process side.
type Store interface {
	Get(ctx context.Context, key string) (journal.Record, error)
	journal.ProcessStore
}

// Deps are what the coordinator works with.
type Deps struct {
	Store Store
	JS    consumer.JetStream
	NC    *consumer.Conn
	// Consumer is the process coordinators' durable consumer
	// (consumer.EnsureProcesses).
	Consumer consumer.Pull
	// Processes are the definitions served; Registry the daemon's
	// operation types (a kept definition is compiled against them).
	Processes *process.Set
	Registry  *operation.Registry
	// ResultsStream is the results stream's name ("" for the default).
	ResultsStream string
	Log           *slog.Logger
	// Metrics counts what the coordinator does (nil: NewMetrics(nil)).
	Metrics *Metrics
	// AtBoundary, when set, is called at each boundary of a process's run
	// (see Boundary); returning true makes the coordinator stop there
	// as a killed process would: nothing more is written, acknowledged or
	// released for that process. Tests use it; a soak build crashes at the
	// same places (crashpoint).
	AtBoundary func(b Boundary, processKey, step string) bool
}

// Coordinator consumes process commands and runs their processes.
type Coordinator struct {
	cfg    Config
	ncfg   consumer.Config
	d      Deps
	log    *slog.Logger
	router *consumer.Router
	prod   *producer.Client
	watch  *watcher

	startstop.BaseStartStop
	work       context.Context
	cancelWork context.CancelCauseFunc
	running    sync.WaitGroup
}

// ErrShutdown is the cause of the work context cancelled past the drain.
var ErrShutdown = errors.New("coordinator: shut down")

// New builds a coordinator; ncfg is the configuration the consumer was
// ensured with.
func New(cfg Config, ncfg consumer.Config, d Deps) (*Coordinator, error) {
	ncfg = ncfg.WithDefaults()
	cfg = cfg.WithConsumer(ncfg)
	if err := cfg.Validate(ncfg); err != nil {
		return nil, err
	}
	if d.Store == nil || d.JS == nil || d.NC == nil || d.Consumer == nil || d.Processes == nil || d.Registry == nil {
		return nil, errors.New("coordinator: store, JetStream, connection, consumer, processes and registry are required")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(nil)
	}
	prod, err := producer.New(d.NC, d.ResultsStream)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, ncfg: ncfg, d: d, log: d.Log, prod: prod, watch: newWatcher(d.NC)}
	c.router = consumer.NewRouter(ncfg, consumer.RouterConfig{MaxInFlight: cfg.MaxInFlight, Handlers: 1},
		d.Consumer, d.JS, d.NC, d.Log, consumer.Hooks{})
	return c, nil
}

// Start begins consuming process commands.
func (c *Coordinator) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := c.StartInit(ctx)
	if !shouldStart {
		return fmt.Errorf("coordinator: %w", startstop.ErrAlreadyStarted)
	}
	c.work, c.cancelWork = context.WithCancelCause(context.WithoutCancel(ctx))
	c.router.Start(ctx, c.handleBatch)
	go func() {
		started()
		defer stopped()
		<-ctx.Done()
		c.drain()
	}()
	return nil
}

// Stop stops fetching, lets running processes reach a point where their
// command can come back (a step's wait ends at once), then ends. Nothing
// unpublished is acknowledged. Safe twice and before Start.
func (c *Coordinator) Stop() { c.BaseStartStop.Stop() }

func (c *Coordinator) drain() {
	c.router.StopFetching()
	c.cancelWork(ErrShutdown) // waits end now: their commands come back
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	if err := c.router.Drain(ctx); err != nil {
		c.log.Warn("coordinator shutdown timeout: process commands still held come back after AckWait")
	}
	cancel()
	c.running.Wait()
	c.watch.close()
	c.router.Close()
}

// handleBatch runs each fetched process command on its own goroutine: a
// process holds its command for as long as it waits on a step.
func (c *Coordinator) handleBatch(ds []*consumer.Delivery) {
	for _, d := range ds {
		c.running.Add(1)
		c.d.Metrics.held.Inc()
		d.OnSettled(c.d.Metrics.held.Dec)
		go func() {
			defer c.running.Done()
			c.handle(d)
		}()
	}
}
