package postgres

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Purge deletes terminal operations completed before the given time.
func (s *Store) Purge(ctx context.Context, operationType string, before time.Time) (int64, error) {
	return sqljournal.Purge(s.cfg.PurgeChunk, func() (int64, error) {
		tag, err := s.db.Exec(ctx, purge, before, operationType, s.cfg.PurgeChunk)
		return tag.RowsAffected(), err
	})
}
