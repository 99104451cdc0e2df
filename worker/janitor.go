package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// JanitorConfig sets retention. Retention must exceed the redelivery
// horizon and the duplicate window (checked at start-up by the daemon): a row
// deleted earlier turns a late redelivery into a new operation.
type JanitorConfig struct {
	// Retention keeps finished operations this long. Required.
	Retention time.Duration
	// ByType overrides Retention per operation type.
	ByType map[string]time.Duration
	// Interval between passes. Default 10m.
	Interval time.Duration
	// Types are the operation types to purge; default every registered type.
	Types []string
}

// Janitor deletes finished operations past their retention; never started,
// failed_retryable or unknown ones.
type Janitor struct {
	cfg   JanitorConfig
	store journal.Store
	log   *slog.Logger
	startstop.BaseStartStop
}

// NewJanitor builds a janitor.
func NewJanitor(cfg JanitorConfig, store journal.Store, log *slog.Logger) (*Janitor, error) {
	if cfg.Retention <= 0 {
		return nil, errors.New("janitor: retention must be positive")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Minute
	}
	if len(cfg.Types) == 0 {
		cfg.Types = operation.DefaultRegistry().Names()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Janitor{cfg: cfg, store: store, log: log}, nil
}

// Start runs passes every Interval until Stop (or until ctx ends).
func (j *Janitor) Start(ctx context.Context) error {
	return startEvery(ctx, &j.BaseStartStop, "janitor", j.cfg.Interval, func(ctx context.Context) {
		if n, err := j.RunOnce(ctx); err != nil && ctx.Err() == nil {
			j.log.Error("retention pass failed", "error", err.Error())
		} else if n > 0 {
			j.log.Info("retention pass", "deleted", n)
		}
	})
}

// RunOnce purges each type by its retention, on the database clock.
func (j *Janitor) RunOnce(ctx context.Context) (int64, error) {
	now, err := j.store.Now(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, typ := range j.cfg.Types {
		r := j.cfg.Retention
		if tr, ok := j.cfg.ByType[typ]; ok {
			r = tr
		}
		n, err := j.store.Purge(ctx, typ, now.Add(-r))
		total += n
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", typ, err)
		}
	}
	// Business processes at rest go by the same retention (their steps are
	// operations, purged above by their types').
	if ps, ok := j.store.(journal.ProcessStore); ok {
		n, err := ps.PurgeProcesses(ctx, now.Add(-j.cfg.Retention))
		total += n
		if err != nil {
			return total, fmt.Errorf("purge processes: %w", err)
		}
	}
	return total, nil
}
