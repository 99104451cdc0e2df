package sqljournal

import (
	"context"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/idemgate/idemgate/journal"
)

// The migration steps both engines run on their goose provider.

// Up applies p's pending migrations and lists the versions it applied.
func Up(ctx context.Context, p *goose.Provider) ([]int64, error) {
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	return versions(res), nil
}

// DownTo rolls p's migrations back, newest first, until version is the
// newest applied (0: none), and lists the versions it rolled back.
func DownTo(ctx context.Context, p *goose.Provider, version int64) ([]int64, error) {
	res, err := p.DownTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return versions(res), nil
}

// States lists every migration of p with whether it is applied.
func States(ctx context.Context, p *goose.Provider) ([]journal.MigrationState, error) {
	st, err := status(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]journal.MigrationState, 0, len(st))
	for _, s := range st {
		out = append(out, journal.MigrationState{Version: s.Source.Version, Source: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// Pending lists the versions p's database lacks.
func Pending(ctx context.Context, p *goose.Provider) ([]int64, error) {
	st, err := status(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, s := range st {
		if s.State != goose.StateApplied {
			out = append(out, s.Source.Version)
		}
	}
	return out, nil
}

// HasPending reports whether p's database lacks migrations.
func HasPending(ctx context.Context, p *goose.Provider) (bool, error) { return p.HasPending(ctx) }

func status(ctx context.Context, p *goose.Provider) ([]*goose.MigrationStatus, error) {
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	return st, nil
}

func versions(res []*goose.MigrationResult) []int64 {
	out := make([]int64, 0, len(res))
	for _, r := range res {
		out = append(out, r.Source.Version)
	}
	return out
}
