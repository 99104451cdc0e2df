package sqlite

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/journal/internal/sqljournal"
)

// Purge deletes terminal operations completed before the given time, one
// bounded chunk per write transaction so that claims are not held up.
func (s *Store) Purge(ctx context.Context, operationType string, before time.Time) (int64, error) {
	return sqljournal.Purge(s.cfg.PurgeChunk, func() (n int64, err error) {
		err = s.write(ctx, func(tx *writeTx) error {
			res, err := tx.ExecContext(ctx, purge, before.UnixMilli(), operationType, s.cfg.PurgeChunk)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		return n, err
	})
}
