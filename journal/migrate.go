package journal

import (
	"context"
	"errors"
	"fmt"
)

// MigrationPolicy is what opening a store does about the migrations this
// binary carries that the database lacks. Both engines follow it through
// Prepare, so the choice means the same on PostgreSQL and SQLite.
type MigrationPolicy uint8

// Migration policies.
const (
	// MigrateOnOpen applies pending migrations (under the engine's lock)
	// before the store is used: journal.auto_migrate: true. The zero value.
	MigrateOnOpen MigrationPolicy = iota
	// RequireMigrated refuses to open a journal with migrations pending,
	// with an error wrapping ErrNotMigrated that names `idemgate migrate
	// up`: journal.auto_migrate: false, and the tools that only read or
	// resolve (they never change a schema).
	RequireMigrated
	// SkipMigrations neither applies nor checks them: for the migrate
	// command itself, which lists and applies them.
	SkipMigrations
)

// String names the policy.
func (p MigrationPolicy) String() string {
	switch p {
	case MigrateOnOpen:
		return "migrate on open"
	case RequireMigrated:
		return "require migrated"
	case SkipMigrations:
		return "skip migrations"
	}
	return fmt.Sprintf("MigrationPolicy(%d)", uint8(p))
}

// MigrationState is one migration's version, name and whether it is
// applied, as an engine lists them.
type MigrationState struct {
	Version int64
	Source  string
	Applied bool
}

// ErrNotMigrated: the journal lacks migrations and the policy forbids
// applying them at open.
var ErrNotMigrated = errors.New("journal: migrations pending")

// Prepare applies the policy to the journal at where (a file, a schema: it
// names the journal in errors). pending lists the versions not applied yet;
// up applies them and lists what it applied.
func (p MigrationPolicy) Prepare(ctx context.Context, where string,
	pending func(context.Context) ([]int64, error), up func(context.Context) ([]int64, error)) error {
	switch p {
	case SkipMigrations:
		return nil
	case MigrateOnOpen:
		_, err := up(ctx)
		return err
	case RequireMigrated:
		vs, err := pending(ctx)
		if err != nil {
			return fmt.Errorf("%s: migration status: %w", where, err)
		}
		if len(vs) > 0 {
			return NotMigrated(where, vs)
		}
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, p)
}

// NotMigrated is the refusal of a journal that lacks the migrations pending
// (none listed: no journal exists yet at where).
func NotMigrated(where string, pending []int64) error {
	what := "no journal database yet"
	if len(pending) > 0 {
		what = fmt.Sprintf("%d migration(s) not applied %v", len(pending), pending)
	}
	return fmt.Errorf("%s: %s; run `idemgate migrate up` first (or set journal.auto_migrate: true): %w", where, what, ErrNotMigrated)
}
