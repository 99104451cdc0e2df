package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemgate/idemgate/journal"
)

// driverName is modernc.org/sqlite's database/sql driver.
const driverName = "sqlite"

// Store is the SQLite journal. It is safe for concurrent use, and several
// stores (in one process or several) may share one database file.
type Store struct {
	path      string
	w         *sql.DB // the one writer connection
	r         *sql.DB // read-only connections
	ws        stmtCache
	rd        readDB
	cfg       Config
	closeOnce sync.Once
}

var _ journal.Store = (*Store)(nil)

// Config tunes the store. The zero value is usable; see WithDefaults.
type Config struct {
	// BusyTimeout is how long a write waits for another process's write
	// transaction on the same file before it fails. Default 5s.
	BusyTimeout time.Duration
	// Readers is the size of the read-only connection pool (Get, Attempts,
	// replays). Default 4.
	Readers int
	// Retries bounds how often a write transaction that found the database
	// busy past BusyTimeout is tried again. Default 5.
	Retries int
	// PurgeChunk is how many rows one purge transaction deletes. Default 5000.
	PurgeChunk int
	// Logger receives goose's migration log; nil discards it. It is set in
	// code, never read from a configuration file.
	Logger *slog.Logger `mapstructure:"-" yaml:"-" json:"-"`
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.Readers <= 0 {
		c.Readers = 4
	}
	if c.Retries <= 0 {
		c.Retries = 5
	}
	if c.PurgeChunk <= 0 {
		c.PurgeChunk = 5000
	}
	return c
}

// Validate rejects settings that cannot work; zero means the default.
func (c Config) Validate() error {
	switch {
	case c.BusyTimeout < 0:
		return fmt.Errorf("%w: sqlite journal: negative busy timeout %v", journal.ErrInvalid, c.BusyTimeout)
	case c.BusyTimeout > 0 && c.BusyTimeout < time.Millisecond:
		return fmt.Errorf("%w: sqlite journal: busy timeout %v below a millisecond", journal.ErrInvalid, c.BusyTimeout)
	case c.Readers < 0:
		return fmt.Errorf("%w: sqlite journal: negative reader count %d", journal.ErrInvalid, c.Readers)
	case c.Retries < 0:
		return fmt.Errorf("%w: sqlite journal: negative retry count %d", journal.ErrInvalid, c.Retries)
	case c.PurgeChunk < 0:
		return fmt.Errorf("%w: sqlite journal: negative purge chunk %d", journal.ErrInvalid, c.PurgeChunk)
	}
	return nil
}

// dsn is the modernc.org/sqlite data source for path. The writer gets WAL,
// FULL synchronous commits (a commit is on disk when it returns: a claim that
// vanished in a power cut could let an operation execute twice), foreign keys
// (attempts leave with their operation) and BEGIN IMMEDIATE, so a write
// transaction takes the write lock before it reads. Readers are query-only.
func dsn(path string, cfg Config, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// Open opens (creating it and its folder if needed) the journal database at
// path, applies pending migrations and returns a store that closes it.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if path == "" {
		return nil, fmt.Errorf("%w: sqlite journal: empty path", journal.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite journal folder: %w", err)
	}
	w, err := openWriter(ctx, abs, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := migrate(ctx, w, cfg.Logger); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open(driverName, dsn(abs, cfg, false))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	r.SetMaxOpenConns(cfg.Readers)
	r.SetMaxIdleConns(cfg.Readers)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	ws, err := prepareAll(ctx, w, writeQueries...)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	rs, err := prepareAll(ctx, r, readQueries...)
	if err != nil {
		ws.close()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", abs, err)
	}
	return &Store{path: abs, w: w, r: r, ws: ws, rd: readDB{r, rs}, cfg: cfg}, nil
}

// openWriter opens the one writer connection and checks that WAL took: a
// database that cannot use WAL (":memory:", some network file systems) would
// block readers behind every write.
func openWriter(ctx context.Context, path string, cfg Config) (*sql.DB, error) {
	w, err := sql.Open(driverName, dsn(path, cfg, true))
	if err != nil {
		return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("sqlite journal %s: journal mode is %q, not WAL", path, mode)
	}
	return w, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the store's connections; it is safe to call twice.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.rd.stmts.close()
		s.ws.close()
		s.r.Close()
		s.w.Close()
	})
}

// Now returns SQLite's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.rd.QueryRowContext(ctx, selectNow).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("journal clock: %w", err)
	}
	return fromMS(ms), nil
}

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

// busy reports whether err is SQLITE_BUSY: another connection held the
// write lock past the busy timeout, and nothing was applied.
func busy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY // and its extended codes
}

// write runs fn in one write transaction (BEGIN IMMEDIATE on the writer
// connection) whose time tx.now is read once from SQLite's clock, and commits: one fsync for all fn wrote. A transaction that
// found the database busy is run again, at most Retries times; fn must
// therefore derive everything from what it reads.
func (s *Store) write(ctx context.Context, fn func(tx *writeTx) error) error {
	for try := 0; ; try++ {
		err := s.writeOnce(ctx, fn)
		if err == nil || !busy(err) || try >= s.cfg.Retries || ctx.Err() != nil {
			return err
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(tx *writeTx) error) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // a failed commit is already rolled back by the driver
		}
	}()
	w := &writeTx{tx: tx, stmts: s.ws}
	if err := w.QueryRowContext(ctx, selectNow).Scan(&w.now); err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	if err := fn(w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// checkText rejects text that SQLite would store differently from how
// PostgreSQL stores it or refuses it: invalid UTF-8 and NUL bytes.
func checkText(key, field, v string) error {
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s: %s is not valid UTF-8 text", journal.ErrInvalid, key, field)
	}
	return nil
}

func validateClaim(r journal.ClaimRequest) error {
	if err := r.Validate(); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, v string }{
		{"key", r.Key}, {"operation type", r.OperationType}, {"request hash", r.RequestHash},
		{"target system", r.TargetSystem}, {"event id", r.EventID}, {"approval id", r.ApprovalID}, {"owner", r.Owner},
	} {
		if err := checkText(r.Key, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validateCompletion(c journal.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, v string }{
		{"key", c.Key}, {"target object id", c.TargetObjectID}, {"error code", c.ErrorCode},
		{"target request id", c.TargetRequestID}, {"note", c.Note},
	} {
		if err := checkText(c.Key, f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Claim decides every request of the batch. A plain read on the reader pool
// decides replays, conflicts and live leases without touching the writer;
// the other keys are decided and claimed in one write transaction.
func (s *Store) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	out := make([]journal.Claim, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	for _, r := range reqs {
		if err := validateClaim(r); err != nil {
			return nil, err
		}
	}
	// One decision per key: later duplicates of a key in the batch follow
	// journal.Repeat.
	first := make(map[string]int, len(reqs))
	pending := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if _, dup := first[r.Key]; dup {
			continue
		}
		first[r.Key] = i
		pending = append(pending, i)
	}

	recs, err := readRecords(ctx, s.rd, selectRecords, keysJSON(reqs, pending))
	if err != nil {
		return nil, fmt.Errorf("claim read: %w", err)
	}
	var writes []int
	for _, i := range pending {
		if rec, ok := recs[reqs[i].Key]; ok {
			if d, settled := journal.DecideExisting(&reqs[i], &rec.Record, rec.leaseLive); settled {
				out[i] = journal.Claim{Decision: d, Record: rec.Record, Now: rec.now}
				continue
			}
		}
		writes = append(writes, i)
	}
	if len(writes) > 0 {
		err := s.write(ctx, func(tx *writeTx) error {
			return claimTx(ctx, tx, reqs, writes, out)
		})
		if err != nil {
			return nil, claimFailed(err)
		}
	}

	for i, r := range reqs {
		if j := first[r.Key]; j != i {
			out[i] = journal.Repeat(r, out[j])
		}
	}
	return out, nil
}

// claimTx decides and claims the requests idx inside a write transaction: it
// reads their rows, inserts the absent keys, re-claims retryable failures and
// takes over unknown outcomes and expired leases, and opens an attempt for
// every lease taken. Nothing else writes meanwhile, so what it read holds.
func claimTx(ctx context.Context, tx *writeTx, reqs []journal.ClaimRequest, idx []int, out []journal.Claim) error {
	recs, err := readRecords(ctx, tx, selectRecordsAt, keysJSON(reqs, idx), tx.now)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	var fresh, retry, takeOver []int
	for _, i := range idx {
		rec, ok := recs[reqs[i].Key]
		if !ok {
			fresh = append(fresh, i)
			continue
		}
		d, settled := journal.DecideExisting(&reqs[i], &rec.Record, rec.leaseLive)
		switch {
		case settled:
			out[i] = journal.Claim{Decision: d, Record: rec.Record, Now: rec.now}
		case journal.TakeOver(rec.Status) == journal.Execute:
			retry = append(retry, i)
		default:
			takeOver = append(takeOver, i)
		}
	}

	attempts := newBatchJSON(len(fresh)+len(retry)+len(takeOver), 64)
	steps := []struct {
		name     string
		sql      string
		idx      []int
		args     func([]journal.ClaimRequest, []int) string
		decision journal.Decision
	}{
		{"insert", claimInsert, fresh, claimJSON, journal.Execute},
		{"retry", claimRetry, retry, leaseJSON, journal.TakeOver(journal.StatusFailedRetryable)},
		{"take-over", claimTakeOver, takeOver, leaseJSON, journal.Reconcile},
	}
	for _, st := range steps {
		if len(st.idx) == 0 {
			continue
		}
		got, err := readRecords(ctx, tx, st.sql, st.args(reqs, st.idx), tx.now)
		if err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		for _, i := range st.idx {
			rec, ok := got[reqs[i].Key]
			if !ok {
				// Impossible while this transaction holds the write lock:
				// fail the batch rather than guess.
				return fmt.Errorf("%s %s: the row changed under the write lock", st.name, reqs[i].Key)
			}
			out[i] = journal.Claim{Decision: st.decision, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record, Now: rec.now}
			attempts.begin()
			attempts.str(rec.Key)
			attempts.str(string(st.decision.AttemptKind()))
			attempts.end()
		}
	}
	if len(fresh)+len(retry)+len(takeOver) > 0 {
		if _, err := tx.ExecContext(ctx, insertAttempts, attempts.String()); err != nil {
			return fmt.Errorf("attempts: %w", err)
		}
	}
	if len(retry)+len(takeOver) > 0 {
		if _, err := tx.ExecContext(ctx, abandonAttempts, keysJSON(reqs, append(retry, takeOver...)), tx.now); err != nil {
			return fmt.Errorf("abandoned attempts: %w", err)
		}
	}
	return nil
}

func keysJSON(reqs []journal.ClaimRequest, idx []int) string {
	j := newBatchJSON(len(idx), 48)
	for _, i := range idx {
		j.key(reqs[i].Key)
	}
	return j.String()
}

func claimJSON(reqs []journal.ClaimRequest, idx []int) string {
	j := newBatchJSON(len(idx), 256)
	for _, i := range idx {
		r := reqs[i]
		j.begin()
		j.str(r.Key)
		j.str(r.OperationType)
		j.str(r.RequestHash)
		j.str(r.TargetSystem)
		j.str(r.EventID)
		j.str(r.ApprovalID)
		j.str(r.Owner)
		j.int(r.LeaseTTL.Milliseconds())
		j.str(r.FieldDigests)
		j.end()
	}
	return j.String()
}

func leaseJSON(reqs []journal.ClaimRequest, idx []int) string {
	j := newBatchJSON(len(idx), 160)
	for _, i := range idx {
		r := reqs[i]
		j.begin()
		j.str(r.Key)
		j.str(r.RequestHash)
		j.str(r.Owner)
		j.int(r.LeaseTTL.Milliseconds())
		j.end()
	}
	return j.String()
}

// claimFailed wraps a claim batch that failed. If its commit applied after
// all, the leases it took stay with an owner that does not know their
// tokens, expire, and are reconciled (looked up in the target) before
// anything executes again, so the safe answer is an error and a redelivery.
func claimFailed(err error) error {
	return fmt.Errorf("claim (leases it may have taken will expire and be reconciled): %w", err)
}

type storedRecord struct {
	journal.Record
	leaseLive bool
	now       time.Time // the clock the read judged the lease by
}

func readRecords(ctx context.Context, q querier, query string, args ...any) (map[string]storedRecord, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]storedRecord)
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out[rec.Key] = rec
	}
	return out, rows.Err()
}

type scanner interface {
	Scan(dest ...any) error
}

func scanRecord(row scanner) (storedRecord, error) {
	var (
		r                                 storedRecord
		status                            string
		result                            []byte
		leaseUntil, completedAt, raisedAt sql.NullInt64
		createdAt, updatedAt, leaseLiv    int64
		effect, now                       int64
	)
	err := row.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &createdAt, &updatedAt, &completedAt,
		&r.ReconcileRoundsTotal, &raisedAt, &effect, &leaseLiv, &now)
	if err != nil {
		return r, err
	}
	r.RaisedAt, r.EffectPossible, r.now = fromNullMS(raisedAt), effect != 0, fromMS(now)
	r.Status = journal.Status(status)
	if len(result) > 0 {
		r.Result = result
	}
	r.CreatedAt, r.UpdatedAt = fromMS(createdAt), fromMS(updatedAt)
	r.LeaseUntil, r.CompletedAt = fromNullMS(leaseUntil), fromNullMS(completedAt)
	r.leaseLive = leaseLiv != 0
	return r, nil
}

// Complete applies a batch of outcomes in one write transaction. Items that
// did not apply are re-read in it to tell a stale token, an illegal
// transition and an outcome already applied (by an earlier call whose commit
// seemed to fail). If the transaction itself fails, its commit may still
// have applied: the items are re-read before anything is decided.
func (s *Store) Complete(ctx context.Context, cs []journal.Completion) ([]error, error) {
	out := make([]error, len(cs))
	if len(cs) == 0 {
		return out, nil
	}
	for _, c := range cs {
		if err := validateCompletion(c); err != nil {
			return nil, err
		}
	}
	// A key twice in one batch is applied in order, one statement per repeat.
	var groups [][]int
	for rest := indexes(len(cs)); len(rest) > 0; {
		var group, later []int
		seen := make(map[string]bool, len(rest))
		for _, i := range rest {
			if seen[cs[i].Key] {
				later = append(later, i)
				continue
			}
			seen[cs[i].Key] = true
			group = append(group, i)
		}
		groups = append(groups, group)
		rest = later
	}
	err := s.write(ctx, func(tx *writeTx) error {
		clear(out)
		for _, g := range groups {
			if err := completeGroup(ctx, tx, cs, g, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	return s.completeRecheck(ctx, cs, err)
}

func indexes(n int) []int {
	ix := make([]int, n)
	for i := range ix {
		ix[i] = i
	}
	return ix
}

func completionJSON(cs []journal.Completion, idx []int) string {
	j := newBatchJSON(len(idx), 192)
	for _, i := range idx {
		c := cs[i]
		j.begin()
		j.str(c.Key)
		j.int(c.Token)
		j.str(string(c.Status))
		j.str(c.TargetObjectID)
		if len(c.Result) > 0 {
			j.str(string(c.Result))
		} else {
			j.null()
		}
		j.str(c.ErrorCode)
		j.str(c.TargetRequestID)
		j.str(c.Note)
		if c.Reconciled {
			j.int(1)
		} else {
			j.int(0)
		}
		j.int(c.HoldFor.Milliseconds())
		j.end()
	}
	return j.String()
}

func completeGroup(ctx context.Context, tx *writeTx, cs []journal.Completion, group []int, out []error) error {
	applied := make(map[string]bool, len(group))
	if err := queryKeys(ctx, tx, applied, complete, completionJSON(cs, group), tx.now); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	var done, check []int
	for _, i := range group {
		if applied[cs[i].Key] {
			done = append(done, i)
		} else {
			check = append(check, i)
		}
	}
	if len(done) > 0 {
		if _, err := tx.ExecContext(ctx, completeAttempts, completionJSON(cs, done), tx.now); err != nil {
			return fmt.Errorf("complete attempts: %w", err)
		}
	}
	if len(check) == 0 {
		return nil
	}
	states, err := readStates(ctx, tx, cs, check)
	if err != nil {
		return fmt.Errorf("complete re-read: %w", err)
	}
	var stale []int
	for _, i := range check {
		out[i] = journal.NotApplied(&cs[i], states[cs[i].Key])
		if errors.Is(out[i], journal.ErrStaleToken) {
			stale = append(stale, i)
		}
	}
	if len(stale) > 0 {
		if _, err := tx.ExecContext(ctx, fenceAttempts, completionJSON(cs, stale), tx.now); err != nil {
			return fmt.Errorf("fenced attempts: %w", err)
		}
	}
	return nil
}

func readStates(ctx context.Context, q querier, cs []journal.Completion, idx []int) (map[string]journal.CompletionRow, error) {
	keys := newBatchJSON(len(idx), 48)
	for _, i := range idx {
		keys.key(cs[i].Key)
	}
	rows, err := q.QueryContext(ctx, completeCheck, keys.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	states := make(map[string]journal.CompletionRow, len(idx))
	for rows.Next() {
		var k, st string
		var tok int64
		if err := rows.Scan(&k, &st, &tok); err != nil {
			return nil, err
		}
		states[k] = journal.CompletionRow{Found: true, Status: journal.Status(st), Token: tok}
	}
	return states, rows.Err()
}

// completeRecheck decides a completion batch whose transaction failed: it
// may have committed. Items found applied are not errors; if any item could
// still apply, the whole call fails with the transaction's error (the caller
// completes again with the same token, which is safe).
func (s *Store) completeRecheck(ctx context.Context, cs []journal.Completion, execErr error) ([]error, error) {
	states, err := readStates(ctx, s.rd, cs, indexes(len(cs)))
	if err != nil {
		return nil, fmt.Errorf("complete: %w (re-read: %v)", execErr, err)
	}
	out := make([]error, len(cs))
	for i := range cs {
		c := &cs[i]
		row := states[c.Key]
		if row.Open(c) {
			return nil, fmt.Errorf("complete: %w", execErr)
		}
		out[i] = journal.NotApplied(c, row)
	}
	return out, nil
}

// queryKeys runs a statement returning one key per row and marks those keys.
func queryKeys(ctx context.Context, q querier, into map[string]bool, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		into[k] = true
	}
	return rows.Err()
}

// Heartbeat extends the leases still held with these tokens, in one write
// transaction.
func (s *Store) Heartbeat(ctx context.Context, refs []journal.LeaseRef, ttl time.Duration) ([]error, error) {
	out := make([]error, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: heartbeat TTL %v too short", journal.ErrInvalid, ttl)
	}
	j := newBatchJSON(len(refs), 64)
	for _, r := range refs {
		if err := checkText(r.Key, "key", r.Key); err != nil {
			return nil, err
		}
		j.begin()
		j.str(r.Key)
		j.int(r.Token)
		j.end()
	}
	arg := j.String()
	live := make(map[string]bool, len(refs))
	err := s.write(ctx, func(tx *writeTx) error {
		clear(live)
		return queryKeys(ctx, tx, live, heartbeat, arg, tx.now, ttl.Milliseconds())
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	for i, r := range refs {
		if !live[r.Key] {
			out[i] = fmt.Errorf("heartbeat %s with token %d: %w", r.Key, r.Token, journal.ErrStaleToken)
		}
	}
	return out, nil
}

// TakeOverStale takes over unknown outcomes and expired leases for the
// reconciler. There is no SKIP LOCKED in SQLite: callers are serialised by
// the one writer, and each row is taken by a conditional UPDATE … RETURNING,
// so no row is handed to two callers.
func (s *Store) TakeOverStale(ctx context.Context, owner string, ttl time.Duration, limit int) ([]journal.Claim, error) {
	if owner == "" || ttl < time.Millisecond || limit <= 0 {
		return nil, fmt.Errorf("%w: take-over needs an owner, a TTL and a limit", journal.ErrInvalid)
	}
	if err := checkText("take-over", "owner", owner); err != nil {
		return nil, err
	}
	var out []journal.Claim
	err := s.write(ctx, func(tx *writeTx) error {
		out = out[:0]
		got, err := readRecords(ctx, tx, takeOverStale, owner, tx.now, ttl.Milliseconds(), limit)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return nil
		}
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		attempts := newBatchJSON(len(keys), 64)
		taken := newBatchJSON(len(keys), 48)
		for _, k := range keys {
			rec := got[k]
			out = append(out, journal.Claim{Decision: journal.Reconcile, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record, Now: rec.now})
			attempts.begin()
			attempts.str(k)
			attempts.str(string(journal.KindReconcile))
			attempts.end()
			taken.key(k)
		}
		if _, err = tx.ExecContext(ctx, insertAttempts, attempts.String()); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, abandonAttempts, taken.String(), tx.now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("take over stale: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Resolve records an operator's decision on an operation that is not final.
// The row is checked and changed in one write transaction.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	for _, f := range [...]struct{ name, v string }{
		{"key", r.Key}, {"target object id", r.TargetObjectID}, {"error code", r.ErrorCode},
		{"evidence", r.Evidence}, {"operator", r.Operator},
	} {
		if err := checkText(r.Key, f.name, f.v); err != nil {
			return journal.Record{}, err
		}
	}
	var done bool
	err := s.write(ctx, func(tx *writeTx) error {
		done = false
		var status, owner string
		var live bool
		err := tx.QueryRowContext(ctx, resolveCheck, r.Key, tx.now).Scan(&status, &owner, &live)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if !r.Applies(journal.Status(status), live) {
			return nil
		}
		var attempt, token int64
		err = tx.QueryRowContext(ctx, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, tx.now).Scan(&attempt, &token)
		if err != nil {
			return err
		}
		note := r.Evidence
		if live {
			note += " [forced over the live execute of " + owner + "]"
		}
		if _, err := tx.ExecContext(ctx, resolveAttempt, r.Key, attempt, token, r.Operator, tx.now, string(r.Status), r.ErrorCode, note); err != nil {
			return fmt.Errorf("attempt: %w", err)
		}
		if _, err := tx.ExecContext(ctx, abandonAttempts, newBatchJSON(1, 0).keys(r.Key), tx.now); err != nil {
			return fmt.Errorf("abandoned attempts: %w", err)
		}
		done = true
		return nil
	})
	if err != nil {
		return journal.Record{}, fmt.Errorf("resolve %s: %w", r.Key, err)
	}
	rec, err := s.Get(ctx, r.Key)
	if err != nil {
		return journal.Record{}, err
	}
	if !done {
		return rec, journal.ResolveRefused(rec)
	}
	return rec, nil
}

// RaiseForReview marks unknown operations raised for review, once each.
func (s *Store) RaiseForReview(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	j := newBatchJSON(len(keys), 48)
	for _, k := range keys {
		if err := checkText(k, "key", k); err != nil {
			return nil, err
		}
		j.key(k)
	}
	arg := j.String()
	marked := make(map[string]bool, len(keys))
	err := s.write(ctx, func(tx *writeTx) error {
		clear(marked)
		return queryKeys(ctx, tx, marked, raiseForReview, arg, tx.now)
	})
	if err != nil {
		return nil, fmt.Errorf("raise for review: %w", err)
	}
	out := make([]string, 0, len(marked))
	for _, k := range keys {
		if marked[k] {
			out = append(out, k)
			delete(marked, k)
		}
	}
	return out, nil
}

// Get returns one operation.
func (s *Store) Get(ctx context.Context, key string) (journal.Record, error) {
	rec, err := scanRecord(s.rd.QueryRowContext(ctx, selectRecord, key))
	if errors.Is(err, sql.ErrNoRows) {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, err)
	}
	return rec.Record, nil
}

// FieldDigests implements journal.Store (a rare read: unprepared).
func (s *Store) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := s.rd.QueryRowContext(ctx, selectFieldDigests, key).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("field digests %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("field digests %s: %w", key, err)
	}
	return d, nil
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	rows, err := s.rd.QueryContext(ctx, selectAttempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	defer rows.Close()
	var out []journal.Attempt
	for rows.Next() {
		var a journal.Attempt
		var started int64
		var finished sql.NullInt64
		var outcome string
		if err := rows.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, &started, &finished,
			&outcome, &a.ErrorCode, &a.TargetRequestID, &a.Note); err != nil {
			return nil, fmt.Errorf("attempts %s: %w", key, err)
		}
		a.StartedAt, a.FinishedAt = fromMS(started), fromNullMS(finished)
		a.Outcome = journal.AttemptOutcome(outcome)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	return out, nil
}

// ListUnresolved lists unknown operations that reconciliation could not settle.
func (s *Store) ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rd.QueryContext(ctx, listUnresolved, minRounds, limit)
	if err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	defer rows.Close()
	var out []journal.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list unresolved: %w", err)
		}
		out = append(out, rec.Record)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	return out, nil
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (s *Store) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.rd.QueryContext(ctx, listIdleRetryable, idle.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	defer rows.Close()
	var out []journal.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list idle retryable: %w", err)
		}
		out = append(out, rec.Record)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	return out, nil
}

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
