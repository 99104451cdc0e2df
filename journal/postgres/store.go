package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgate/idemgate/journal"
)

// Store is the PostgreSQL journal. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	db   querier // the pool (a transaction in tests)
	own  bool
	cfg  Config
}

// querier sends the store's statements: a pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var _ journal.Store = (*Store)(nil)

// Config tunes the store. The zero value is usable; see WithDefaults.
type Config struct {
	// ClaimRounds bounds how often a claim re-decides keys whose state moved
	// between its statements (a lease that expired in between). Default 3.
	ClaimRounds int
	// Retries bounds how often a batch rolled back by a deadlock or
	// serialization failure is sent again. Default 5.
	Retries int
	// PurgeChunk is how many rows one purge statement deletes. Default 5000.
	PurgeChunk int
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.ClaimRounds <= 0 {
		c.ClaimRounds = 3
	}
	if c.Retries <= 0 {
		c.Retries = 5
	}
	if c.PurgeChunk <= 0 {
		c.PurgeChunk = 5000
	}
	return c
}

// Open connects a pool to dsn and returns a store that closes it.
// application_name defaults to idemgate so the daemon shows in pg_stat_activity.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("journal database URL: %w", err)
	}
	params := pcfg.ConnConfig.RuntimeParams
	if _, ok := params["application_name"]; !ok {
		params["application_name"] = "idemgate"
	}
	// A cached generic plan for "operation_key = ANY($1)" can turn into a
	// sequential scan on a young table (measured: 16–27 ms per batch read at
	// a few thousand rows); custom plans keep to the primary key.
	if _, ok := params["plan_cache_mode"]; !ok {
		params["plan_cache_mode"] = "force_custom_plan"
	}
	// The daemon holds up to two claims, two group commits, the heartbeat,
	// the reconciler and the janitor at once: pgx's default of max(4, CPUs)
	// connections would queue them.
	if !strings.Contains(dsn, "pool_max_conns") {
		pcfg.MaxConns = max(pcfg.MaxConns, 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("journal database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("journal database: %w", err)
	}
	s := New(pool, cfg)
	s.own = true
	return s, nil
}

// New returns a store over an existing pool, which the caller keeps owning.
func New(pool *pgxpool.Pool, cfg Config) *Store {
	return &Store{pool: pool, db: pool, cfg: cfg.WithDefaults()}
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool if the store opened it.
func (s *Store) Close() {
	if s.own {
		s.pool.Close()
	}
}

// Now returns the database clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.db.QueryRow(ctx, selectNow).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("journal clock: %w", err)
	}
	return t, nil
}

// retryable reports whether a whole batch was rolled back by the server in a
// way that makes sending it again safe and useful.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == pgerrcode.DeadlockDetected || pe.Code == pgerrcode.SerializationFailure
	}
	return false
}

type storedRecord struct {
	journal.Record
	leaseLive bool
	now       time.Time // the database clock of the read
}

func scanRecords(rows pgx.Rows, err error) (map[string]storedRecord, error) {
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

func scanRecord(row pgx.Row) (storedRecord, error) {
	var (
		r                 storedRecord
		status            string
		result            []byte
		leaseUntil        *time.Time
		completedAt       *time.Time
		raisedAt          *time.Time
		createdAt, update time.Time
	)
	err := row.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &createdAt, &update, &completedAt,
		&r.ReconcileRoundsTotal, &raisedAt, &r.EffectPossible, &r.leaseLive, &r.now)
	if err != nil {
		return r, err
	}
	r.Status = journal.Status(status)
	if len(result) > 0 {
		r.Result = json.RawMessage(result)
	}
	r.CreatedAt, r.UpdatedAt = createdAt, update
	if leaseUntil != nil {
		r.LeaseUntil = *leaseUntil
	}
	if completedAt != nil {
		r.CompletedAt = *completedAt
	}
	if raisedAt != nil {
		r.RaisedAt = *raisedAt
	}
	return r, nil
}

// queryKeys runs a statement returning one key per row and marks those keys.
func (s *Store) queryKeys(ctx context.Context, into map[string]bool, sql string, args ...any) error {
	rows, err := s.db.Query(ctx, sql, args...)
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

// Heartbeat extends the leases still held with these tokens.
func (s *Store) Heartbeat(ctx context.Context, refs []journal.LeaseRef, ttl time.Duration) ([]error, error) {
	out := make([]error, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: heartbeat TTL %v too short", journal.ErrInvalid, ttl)
	}
	keys := make([]string, len(refs))
	tokens := make([]int64, len(refs))
	for i, r := range refs {
		keys[i], tokens[i] = r.Key, r.Token
	}
	live := make(map[string]bool, len(refs))
	if err := s.queryKeys(ctx, live, heartbeat, keys, tokens, ttl.Milliseconds()); err != nil {
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
// reconciler.
func (s *Store) TakeOverStale(ctx context.Context, owner string, ttl time.Duration, limit int) ([]journal.Claim, error) {
	if owner == "" || ttl < time.Millisecond || limit <= 0 {
		return nil, fmt.Errorf("%w: take-over needs an owner, a TTL and a limit", journal.ErrInvalid)
	}
	taken := make(map[string]bool)
	if err := s.queryKeys(ctx, taken, takeOverStale, owner, ttl.Milliseconds(), limit); err != nil {
		return nil, fmt.Errorf("take over stale: %w", err)
	}
	if len(taken) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(taken))
	for k := range taken {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	recs, err := scanRecords(s.db.Query(ctx, selectRecords, keys))
	if err != nil {
		return nil, fmt.Errorf("take over stale: read: %w", err)
	}
	out := make([]journal.Claim, 0, len(keys))
	for _, k := range keys {
		rec, ok := recs[k]
		if !ok || rec.LeaseOwner != owner {
			continue
		}
		out = append(out, journal.Claim{Decision: journal.Reconcile, Token: rec.LeaseToken, Attempt: rec.AttemptCount,
			Record: rec.Record, Now: rec.now})
	}
	return out, nil
}

// Resolve records an operator's decision on an operation that is not final.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	done := make(map[string]bool, 1)
	if err := s.queryKeys(ctx, done, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, r.Evidence, r.Force); err != nil {
		return journal.Record{}, fmt.Errorf("resolve %s: %w", r.Key, err)
	}
	rec, err := s.Get(ctx, r.Key)
	if err != nil {
		return journal.Record{}, err
	}
	if !done[r.Key] {
		return rec, journal.ResolveRefused(rec)
	}
	return rec, nil
}

// RaiseForReview marks unknown operations raised for review, once each.
func (s *Store) RaiseForReview(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	marked := make(map[string]bool, len(keys))
	if err := s.queryKeys(ctx, marked, raiseForReview, keys); err != nil {
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
	rec, err := scanRecord(s.db.QueryRow(ctx, selectRecord, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, err)
	}
	return rec.Record, nil
}

// FieldDigests implements journal.Store.
func (s *Store) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := s.db.QueryRow(ctx, selectFieldDigests, key).Scan(&d)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("field digests %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("field digests %s: %w", key, err)
	}
	return d, nil
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	rows, err := s.db.Query(ctx, selectAttempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	defer rows.Close()
	var out []journal.Attempt
	for rows.Next() {
		var a journal.Attempt
		var finished *time.Time
		var outcome string
		if err := rows.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, &a.StartedAt, &finished,
			&outcome, &a.ErrorCode, &a.TargetRequestID, &a.Note); err != nil {
			return nil, fmt.Errorf("attempts %s: %w", key, err)
		}
		a.Outcome = journal.AttemptOutcome(outcome)
		if finished != nil {
			a.FinishedAt = *finished
		}
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
	rows, err := s.db.Query(ctx, listUnresolved, minRounds, limit)
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
	return out, rows.Err()
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (s *Store) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.Query(ctx, listIdleRetryable, idle.Milliseconds(), limit)
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
	return out, rows.Err()
}

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
