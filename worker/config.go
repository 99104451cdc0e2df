package worker

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/consumer"
)

// Config tunes the worker. Zero fields take the documented defaults.
type Config struct {
	// Owner names this worker in leases and the attempts trail. Default
	// <hostname>-<pid>-<random>; it must be unique per process.
	Owner string `mapstructure:"owner"`
	// LeaseTTL is the journal lease a claim takes; heartbeats renew it while
	// a call runs. Default 30s.
	LeaseTTL time.Duration `mapstructure:"lease_ttl"`
	// CallTimeout bounds one call to a target. Default 10s.
	CallTimeout time.Duration `mapstructure:"call_timeout"`
	// HeartbeatInterval renews leases and AckWait. Default LeaseTTL/3.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// MaxInFlight bounds commands held at once (fetched, not yet acked). Default 1000.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// Claimers is how many fetched batches are claimed concurrently. Default 2.
	Claimers int `mapstructure:"claimers"`
	// CompleteWindow is the group-commit window for completions. Default 2ms.
	CompleteWindow time.Duration `mapstructure:"complete_window"`
	// CompleteBatch caps one group commit. Default 500.
	CompleteBatch int `mapstructure:"complete_batch"`
	// Committers is how many group commits may be in the journal at once;
	// while all are busy the next group keeps filling. Default 2.
	Committers int `mapstructure:"committers"`
	// ShutdownTimeout bounds the drain of in-flight work on Stop. Default 25s.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Retry is the retry policy; Rules classify error codes for every
	// adapter. Default DefaultRules.
	Retry RetryPolicy `mapstructure:"retry"`
	Rules Rules       `mapstructure:"rules"`
	// RulesByAdapter refines Rules for one adapter instance (by its name, as
	// routes name it): a code listed here takes this class for that target,
	// every other code keeps its global class.
	RulesByAdapter map[string]Rules `mapstructure:"rules_by_adapter"`
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strconv.FormatInt(time.Now().UnixNano()%1e6, 36))
	}
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 30*time.Second)
	c.CallTimeout = cmp.Or(c.CallTimeout, 10*time.Second)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, c.LeaseTTL/3)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, 1000)
	c.Claimers = cmp.Or(c.Claimers, 2)
	c.CompleteWindow = cmp.Or(c.CompleteWindow, 2*time.Millisecond)
	c.CompleteBatch = cmp.Or(c.CompleteBatch, 500)
	c.Committers = cmp.Or(c.Committers, 2)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 25*time.Second)
	if c.Rules.empty() {
		c.Rules = DefaultRules()
	}
	c.Retry = c.Retry.WithDefaults()
	return c
}

// Validate checks the configuration on its own; ValidateHorizons checks it
// against the consumer's.
func (c Config) Validate() error {
	var errs []error
	if c.CallTimeout <= 0 || c.LeaseTTL <= 0 {
		errs = append(errs, errors.New("worker.call_timeout and worker.lease_ttl must be positive"))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.LeaseTTL {
		errs = append(errs, fmt.Errorf("worker.heartbeat_interval %v: must be positive and below lease_ttl %v", c.HeartbeatInterval, c.LeaseTTL))
	}
	if c.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("worker.max_in_flight %d: at least 1", c.MaxInFlight))
	}
	if c.Claimers < 1 || c.Committers < 1 || c.CompleteBatch < 1 || c.CompleteWindow <= 0 {
		errs = append(errs, errors.New("worker.claimers, committers, complete_batch and complete_window must be positive"))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Rules.compile(); err != nil {
		errs = append(errs, err)
	}
	for name, r := range c.RulesByAdapter {
		if _, err := r.compile(); err != nil {
			errs = append(errs, fmt.Errorf("rules_by_adapter.%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// ValidateHorizons refuses unsafe combinations of timeouts: a call must end
// inside its lease, and a lease (with one missed heartbeat of slack) inside
// the AckWait, or JetStream would redeliver a command whose owner still works.
func ValidateHorizons(w Config, c consumer.Config) error {
	var errs []error
	if w.CallTimeout >= w.LeaseTTL {
		errs = append(errs, fmt.Errorf("unsafe: worker.call_timeout %v must be below worker.lease_ttl %v", w.CallTimeout, w.LeaseTTL))
	}
	if w.LeaseTTL+w.HeartbeatInterval >= c.AckWait {
		errs = append(errs, fmt.Errorf("unsafe: worker.lease_ttl %v plus one heartbeat_interval %v must be below nats.ack_wait %v",
			w.LeaseTTL, w.HeartbeatInterval, c.AckWait))
	}
	if w.Retry.InLease+w.CallTimeout >= c.AckWait {
		errs = append(errs, fmt.Errorf("unsafe: worker.retry.in_lease %v plus call_timeout %v must be below nats.ack_wait %v",
			w.Retry.InLease, w.CallTimeout, c.AckWait))
	}
	if c.CommandsMaxAge > 0 && w.Retry.MaxElapsed >= c.CommandsMaxAge {
		errs = append(errs, fmt.Errorf("unsafe: worker.retry.max_elapsed %v must be below nats.commands_max_age %v: "+
			"a command that leaves the stream cannot come back for its retries", w.Retry.MaxElapsed, c.CommandsMaxAge))
	}
	return errors.Join(errs...)
}
