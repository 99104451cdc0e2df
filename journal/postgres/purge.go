package postgres

import (
	"context"
	"fmt"
	"time"
)

// Purge deletes terminal operations completed before the given time.
func (s *Store) Purge(ctx context.Context, operationType string, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.db.Exec(ctx, purge, before, operationType, s.cfg.PurgeChunk)
		if err != nil {
			return total, fmt.Errorf("purge: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.cfg.PurgeChunk) {
			return total, nil
		}
	}
}
