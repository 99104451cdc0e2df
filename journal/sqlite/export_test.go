package sqlite

import "context"

// MigrateDownTo and PendingAt expose the migration controls that only tests
// use (journaltest.ExerciseMigrations).
func MigrateDownTo(ctx context.Context, path string, version int64) ([]int64, error) {
	return migrateDownTo(ctx, path, version)
}

func PendingAt(ctx context.Context, path string) ([]int64, error) { return pendingAt(ctx, path) }
