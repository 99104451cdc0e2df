package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
)

// TestPagesWrittenPerBatch counts the pages (WAL frames) a claim and its
// completion write on a journal of 20,000 operations with random keys: every
// page is written and fsynced, so this is the disk cost of a batch, measured
// without the disk's noise. The bounds catch a schema or statement change
// that scatters writes (keying the rows by operation_key wrote 668 pages per
// batch of 100 here; rowid tables write about 260). The console's indexes
// (migration 0004: event id, object id, creation order, open statuses)
// raised a single claim and completion from 11 to 17–19 pages and a batch
// of 100 from 260 to about 370: the event and object ids are random, so
// their index entries land on scattered pages. Dropping the status index of
// every row (migration 0006) brought them to 14–16 and about 355.
func TestPagesWrittenPerBatch(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("fills a journal of 20,000 operations: too slow for -short or -race; it counts pages, not races")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := Open(ctx, path, Config{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	_, err = s.w.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0")
	require.NoError(t, err)

	randomKey := func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return "prod:payment.charge:approval-" + hex.EncodeToString(b[:]) + ":v1"
	}
	round := func(batch int) {
		reqs := make([]journal.ClaimRequest, batch)
		for i := range reqs {
			k := randomKey()
			reqs[i] = journal.ClaimRequest{
				Key: k, OperationType: "payment.charge", TargetSystem: "payments", EventID: "evt-" + k[29:45], ApprovalID: "appr-77",
				RequestHash: "28a4262860864e5110d391a4556da2ad2f539ae2f87e52871f80cb7381d86aa6", Owner: "worker-1", LeaseTTL: time.Minute,
			}
		}
		got, err := s.Claim(ctx, reqs)
		require.NoError(t, err)
		cs := make([]journal.Completion, batch)
		for i, c := range got {
			require.Equal(t, journal.Execute, c.Decision)
			cs[i] = journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_2c1f", Result: []byte(`{"business_status":"succeeded"}`)}
		}
		errs, err := s.Complete(ctx, cs)
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	for range 200 {
		round(100)
	}
	for _, tc := range []struct {
		batch    int
		maxPages float64
	}{{1, 20}, {100, 400}} {
		_, err := s.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
		require.NoError(t, err)
		const rounds = 20
		for range rounds {
			round(tc.batch)
		}
		fi, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		const walHeader, frameHeader, pageSize = 32, 24, 4096
		pages := float64(fi.Size()-walHeader) / (frameHeader + pageSize) / rounds
		t.Logf("batch of %d: %.1f pages written per claim and completion", tc.batch, pages)
		require.LessOrEqual(t, pages, tc.maxPages, "batch of %d", tc.batch)
	}
}
