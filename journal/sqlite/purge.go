package sqlite

import (
	"context"
	"fmt"
	"time"
)

// Purge deletes terminal operations completed before the given time, one
// bounded chunk per write transaction so that claims are not held up.
func (s *Store) Purge(ctx context.Context, operationType string, before time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.write(ctx, func(tx *writeTx) error {
			res, err := tx.ExecContext(ctx, purge, before.UnixMilli(), operationType, s.cfg.PurgeChunk)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("purge: %w", err)
		}
		total += n
		if n < int64(s.cfg.PurgeChunk) {
			return total, nil
		}
	}
}
