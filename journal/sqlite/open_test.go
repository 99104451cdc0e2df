package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
)

func TestOpenRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, []byte("x"), 0o600))
	notDB := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notDB, bytes.Repeat([]byte("not a database\n"), 512), 0o600))
	for _, tc := range []struct {
		name string
		path string
		cfg  sqlite.Config
	}{
		{"empty path", "", sqlite.Config{}},
		{"negative busy timeout", filepath.Join(dir, "a.db"), sqlite.Config{BusyTimeout: -time.Second}},
		{"busy timeout below a millisecond", filepath.Join(dir, "a.db"), sqlite.Config{BusyTimeout: time.Microsecond}},
		{"negative readers", filepath.Join(dir, "a.db"), sqlite.Config{Readers: -1}},
		{"negative retries", filepath.Join(dir, "a.db"), sqlite.Config{Retries: -1}},
		{"negative purge chunk", filepath.Join(dir, "a.db"), sqlite.Config{PurgeChunk: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := sqlite.Open(ctx, tc.path, tc.cfg)
			require.ErrorIs(t, err, journal.ErrInvalid)
		})
	}
	t.Run("folder blocked by a file", func(t *testing.T) {
		t.Parallel()
		_, err := sqlite.Open(ctx, filepath.Join(blocker, "journal.db"), sqlite.Config{})
		require.Error(t, err)
	})
	t.Run("not a database", func(t *testing.T) {
		t.Parallel()
		_, err := sqlite.Open(ctx, notDB, sqlite.Config{})
		require.Error(t, err)
		t.Logf("not a database: %v", err)
	})
}

func TestOpenCreatesFolderAndReopens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "idemgate", "journal.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	require.Equal(t, path, s.Path())
	c, err := journal.ClaimOne(ctx, s, sharedReq("test:payment.charge:reopen:v1", "w"))
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "pay_1"}))
	s.Close()
	s.Close() // safe twice

	// A restart finds the outcome; nothing is migrated again.
	applied, err := sqlite.Migrate(ctx, path, nil)
	require.NoError(t, err)
	require.Empty(t, applied)
	s = openAt(t, path)
	got, err := journal.ClaimOne(ctx, s, sharedReq("test:payment.charge:reopen:v1", "w2"))
	require.NoError(t, err)
	require.Equal(t, journal.ReplaySucceeded, got.Decision)
	require.Equal(t, "pay_1", got.Record.TargetObjectID)
	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	require.False(t, pending)
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")

	_, err := sqlite.Migrations(ctx, path)
	require.ErrorIs(t, err, fs.ErrNotExist, "status never creates a journal")
	pending, err := sqlite.Pending(ctx, path)
	require.NoError(t, err)
	require.True(t, pending)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)

	applied, err := sqlite.Migrate(ctx, path, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, applied)
	states, err := sqlite.Migrations(ctx, path)
	require.NoError(t, err)
	require.Len(t, states, 11)
	require.Equal(t, sqlite.MigrationState{Version: 1, Source: "0001_journal.sql", Applied: true}, states[0])
	require.Equal(t, sqlite.MigrationState{Version: 2, Source: "0002_retry_history.sql", Applied: true}, states[1])
	require.Equal(t, sqlite.MigrationState{Version: 3, Source: "0003_field_digests.sql", Applied: true}, states[2])
	require.Equal(t, sqlite.MigrationState{Version: 4, Source: "0004_console.sql", Applied: true}, states[3])
	require.Equal(t, sqlite.MigrationState{Version: 5, Source: "0005_attempt_trace.sql", Applied: true}, states[4])
	require.Equal(t, sqlite.MigrationState{Version: 6, Source: "0006_lean_indexes.sql", Applied: true}, states[5])
	require.Equal(t, sqlite.MigrationState{Version: 7, Source: "0007_approvals.sql", Applied: true}, states[6])
	require.Equal(t, sqlite.MigrationState{Version: 8, Source: "0008_processes.sql", Applied: true}, states[7])
	require.Equal(t, sqlite.MigrationState{Version: 9, Source: "0009_approval_tokens.sql", Applied: true}, states[8])
	pending, err = sqlite.Pending(ctx, path)
	require.NoError(t, err)
	require.False(t, pending)
}

// TestConcurrentOpensMigrateOnce opens one new file from several stores at
// once: all of them work, and the migration is recorded once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "journal.db")
	var wg sync.WaitGroup
	stores := make([]*sqlite.Store, 4)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = sqlite.Open(ctx, path, sqlite.Config{}) })
	}
	wg.Wait()
	for i, s := range stores {
		require.NoError(t, errs[i])
		t.Cleanup(s.Close)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id = 1`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestBusyDatabase holds the write lock from another connection: a write
// waits the busy timeout, retries, and fails with a clear error; reads and
// replays go on; once the lock is released, writes work again.
func TestBusyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{BusyTimeout: 20 * time.Millisecond, Retries: 1})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	done := sharedReq("test:payment.charge:busy-done:v1", "w")
	c, err := journal.ClaimOne(ctx, s, done)
	require.NoError(t, err)
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{Key: done.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: "o"}))

	other, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer other.Close()
	other.SetMaxOpenConns(1)
	conn, err := other.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)

	fresh := sharedReq("test:payment.charge:busy-new:v1", "w")
	_, err = journal.ClaimOne(ctx, s, fresh)
	require.Error(t, err)
	t.Logf("busy: %v", err)
	// Reads do not wait for the writer: a replay still answers.
	got, err := journal.ClaimOne(ctx, s, done)
	require.NoError(t, err)
	require.Equal(t, journal.ReplaySucceeded, got.Decision)

	_, err = conn.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	got, err = journal.ClaimOne(ctx, s, fresh)
	require.NoError(t, err)
	require.Equal(t, journal.Execute, got.Decision)
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := journal.ClaimOne(ctx, s, sharedReq("test:payment.charge:cancel:v1", "w"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Complete(ctx, []journal.Completion{{Key: "test:payment.charge:cancel:v1", Token: 1, Status: journal.StatusSucceeded}})
	require.ErrorIs(t, err, context.Canceled)
	// The writer is not left inside a transaction.
	got, err := journal.ClaimOne(context.Background(), s, sharedReq("test:payment.charge:cancel:v1", "w"))
	require.NoError(t, err)
	require.Equal(t, journal.Execute, got.Decision)
}

func TestRejectsTextSQLiteWouldChange(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	bad := []string{"bad\xffutf8", "nul\x00byte"}
	for _, v := range bad {
		r := sharedReq("test:payment.charge:text:v1", "w")
		r.EventID = v
		_, err := s.Claim(ctx, []journal.ClaimRequest{r})
		require.ErrorIs(t, err, journal.ErrInvalid)
		_, err = s.Complete(ctx, []journal.Completion{{Key: "test:payment.charge:text:v1", Token: 1, Status: journal.StatusFailedFinal, ErrorCode: v}})
		require.ErrorIs(t, err, journal.ErrInvalid)
	}
	// Text that needs escaping travels intact.
	odd := "quote\" back\\slash \n tab\t <html> ключ 😀"
	r := sharedReq("test:payment.charge:odd:v1", odd)
	r.EventID, r.ApprovalID = odd, odd
	c, err := journal.ClaimOne(ctx, s, r)
	require.NoError(t, err)
	require.Equal(t, journal.Execute, c.Decision)
	require.Equal(t, odd, c.Record.EventID)
	require.Equal(t, odd, c.Record.LeaseOwner)
	require.NoError(t, journal.CompleteOne(ctx, s, journal.Completion{
		Key: r.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: odd, Note: odd,
		Result: []byte(`{"note": "` + "ключ \\\" 😀" + `"}`),
	}))
	rec, err := s.Get(ctx, r.Key)
	require.NoError(t, err)
	require.Equal(t, odd, rec.TargetObjectID)
	require.JSONEq(t, `{"note":"ключ \" 😀"}`, string(rec.Result))
	att, err := s.Attempts(ctx, r.Key)
	require.NoError(t, err)
	require.Equal(t, odd, att[0].Note)
	require.Equal(t, odd, att[0].Worker)
	require.False(t, errors.Is(err, journal.ErrInvalid))
}
