package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgate/idemgate/journal"
)

// Store is the PostgreSQL journal. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	own  bool
	cfg  Config
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
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "idemgate"
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
	return &Store{pool: pool, cfg: cfg.WithDefaults()}
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
	if err := s.pool.QueryRow(ctx, selectNow).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("journal clock: %w", err)
	}
	return t, nil
}

// retryable reports whether a whole batch was rolled back by the server in a
// way that makes sending it again safe and useful.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	return false
}

// Claim decides every request of the batch in one round trip: the insert of
// new keys, the conditional take-over of re-claimable rows and a plain read of
// the rest travel as one pipelined implicit transaction. Keys whose state moved
// between those statements are decided again, at most ClaimRounds times.
func (s *Store) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	out := make([]journal.Claim, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	for _, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, err
		}
	}
	// One decision per key: later duplicates of a key in the batch see the
	// first one's lease as in progress.
	first := make(map[string]int, len(reqs))
	pending := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if _, dup := first[r.Key]; dup {
			continue
		}
		first[r.Key] = i
		pending = append(pending, i)
	}
	slices.SortFunc(pending, func(a, b int) int {
		switch {
		case reqs[a].Key < reqs[b].Key:
			return -1
		case reqs[a].Key > reqs[b].Key:
			return 1
		}
		return 0
	})
	for round := 0; len(pending) > 0; round++ {
		var undecided []int
		var err error
		for try := 0; ; try++ {
			undecided, err = s.claimRound(ctx, reqs, pending, out, round+1 >= s.cfg.ClaimRounds)
			if err == nil || !retryable(err) || try >= s.cfg.Retries {
				break
			}
		}
		if err != nil {
			return nil, claimFailed(err)
		}
		pending = undecided
	}
	for i, r := range reqs {
		if j := first[r.Key]; j != i {
			out[i] = out[j]
			if out[j].Owns() {
				out[i] = journal.Claim{Decision: journal.InProgress, Record: out[j].Record}
			}
		}
	}
	return out, nil
}

// claimRound runs the three claim statements for the pending requests and
// fills out. It returns the requests whose state moved under it; on the last
// round those are reported as in progress (the caller redelivers later).
func (s *Store) claimRound(ctx context.Context, reqs []journal.ClaimRequest, pending []int, out []journal.Claim, last bool) ([]int, error) {
	n := len(pending)
	keys := make([]string, n)
	types := make([]string, n)
	hashes := make([]string, n)
	targets := make([]string, n)
	events := make([]string, n)
	approvals := make([]string, n)
	owners := make([]string, n)
	ttls := make([]int64, n)
	for j, i := range pending {
		r := reqs[i]
		keys[j], types[j], hashes[j], targets[j] = r.Key, r.OperationType, r.RequestHash, r.TargetSystem
		events[j], approvals[j], owners[j], ttls[j] = r.EventID, r.ApprovalID, r.Owner, r.LeaseTTL.Milliseconds()
	}

	b := &pgx.Batch{}
	b.Queue(claimInsert, keys, types, hashes, targets, events, approvals, owners, ttls)
	b.Queue(claimTakeOver, keys, hashes, owners, ttls)
	b.Queue(selectRecords, keys)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()

	inserted := make(map[string]bool, n)
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("claim insert: %w", err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim insert: %w", err)
		}
		inserted[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim insert: %w", err)
	}

	takenOver := make(map[string]journal.Status, n)
	rows, err = br.Query()
	if err != nil {
		return nil, fmt.Errorf("claim take-over: %w", err)
	}
	for rows.Next() {
		var k string
		var old journal.Status
		if err := rows.Scan(&k, &old); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim take-over: %w", err)
		}
		takenOver[k] = old
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim take-over: %w", err)
	}

	recs, err := scanRecords(br.Query())
	if err != nil {
		return nil, fmt.Errorf("claim read: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("claim commit: %w", err)
	}

	var undecided []int
	for _, i := range pending {
		r := reqs[i]
		rec, ok := recs[r.Key]
		if !ok {
			// Purged between the statements: claim it afresh.
			undecided = append(undecided, i)
			continue
		}
		switch {
		case inserted[r.Key]:
			out[i] = journal.Claim{Decision: journal.Execute, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record}
		case takenOver[r.Key] != "":
			d := journal.Reconcile
			if takenOver[r.Key] == journal.StatusFailedRetryable {
				d = journal.Execute
			}
			out[i] = journal.Claim{Decision: d, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record}
		default:
			d, settled := decideExisting(r, rec)
			if !settled && !last {
				undecided = append(undecided, i)
				continue
			}
			out[i] = journal.Claim{Decision: d, Record: rec.Record}
		}
	}
	return undecided, nil
}

// decideExisting decides a key this claim neither inserted nor took over.
// settled is false when the row is claimable again (its state moved between
// the statements) and the claim should run once more.
func decideExisting(r journal.ClaimRequest, rec storedRecord) (journal.Decision, bool) {
	if rec.RequestHash != r.RequestHash {
		return journal.Conflict, true
	}
	switch rec.Status {
	case journal.StatusSucceeded:
		return journal.ReplaySucceeded, true
	case journal.StatusFailedFinal:
		return journal.ReplayFailed, true
	case journal.StatusStarted, journal.StatusUnknown:
		if rec.leaseLive {
			return journal.InProgress, true
		}
	}
	return journal.InProgress, false
}

// claimFailed wraps a claim batch that failed. Its commit may have applied:
// leases it took stay with an owner that does not know their tokens, expire,
// and are reconciled (looked up in the target) before anything executes
// again, so the safe answer is an error and a later redelivery.
func claimFailed(err error) error {
	return fmt.Errorf("claim (leases it may have taken will expire and be reconciled): %w", err)
}

type storedRecord struct {
	journal.Record
	leaseLive bool
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
		createdAt, update time.Time
	)
	err := row.Scan(&r.Key, &r.OperationType, &r.RequestHash, &status, &r.TargetSystem,
		&r.TargetObjectID, &result, &r.ErrorCode, &r.AttemptCount,
		&r.EventID, &r.ApprovalID, &r.LeaseOwner, &r.LeaseToken, &leaseUntil,
		&r.ReconcileRounds, &createdAt, &update, &completedAt, &r.leaseLive)
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
	return r, nil
}

// Complete applies a batch of outcomes in one statement. Items that did not
// apply are re-read once to tell a stale token, an illegal transition and an
// outcome already applied (by an earlier call whose commit seemed to fail).
func (s *Store) Complete(ctx context.Context, cs []journal.Completion) ([]error, error) {
	out := make([]error, len(cs))
	if len(cs) == 0 {
		return out, nil
	}
	for _, c := range cs {
		if err := c.Validate(); err != nil {
			return nil, err
		}
	}
	// A key twice in one batch is applied in order, one statement per repeat.
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
		if err := s.completeGroup(ctx, cs, group, out); err != nil {
			return nil, err
		}
		rest = later
	}
	return out, nil
}

func indexes(n int) []int {
	ix := make([]int, n)
	for i := range ix {
		ix[i] = i
	}
	return ix
}

func (s *Store) completeGroup(ctx context.Context, cs []journal.Completion, group []int, out []error) error {
	n := len(group)
	keys := make([]string, n)
	tokens := make([]int64, n)
	statuses := make([]string, n)
	objects := make([]string, n)
	results := make([]*string, n)
	codes := make([]string, n)
	reqIDs := make([]string, n)
	notes := make([]string, n)
	reconciled := make([]bool, n)
	slices.SortFunc(group, func(a, b int) int {
		switch {
		case cs[a].Key < cs[b].Key:
			return -1
		case cs[a].Key > cs[b].Key:
			return 1
		}
		return 0
	})
	for j, i := range group {
		c := cs[i]
		keys[j], tokens[j], statuses[j], objects[j] = c.Key, c.Token, string(c.Status), c.TargetObjectID
		if len(c.Result) > 0 {
			r := string(c.Result)
			results[j] = &r
		}
		codes[j], reqIDs[j], notes[j], reconciled[j] = c.ErrorCode, c.TargetRequestID, c.Note, c.Reconciled
	}
	applied := make(map[string]bool, n)
	var execErr error
	for try := 0; ; try++ {
		clear(applied)
		execErr = s.queryKeys(ctx, applied, complete, keys, tokens, statuses, objects, results, codes, reqIDs, notes, reconciled)
		if execErr == nil || !retryable(execErr) || try >= s.cfg.Retries {
			break
		}
	}
	if execErr != nil && ctx.Err() != nil {
		return fmt.Errorf("complete: %w", execErr)
	}
	var check []string
	for _, i := range group {
		if !applied[cs[i].Key] {
			check = append(check, cs[i].Key)
		}
	}
	if len(check) == 0 {
		return nil
	}
	// Not applied, or the statement failed and may have applied: re-read.
	type state struct {
		status journal.Status
		token  int64
	}
	states := make(map[string]state, len(check))
	rows, err := s.pool.Query(ctx, completeCheck, check)
	if err != nil {
		if execErr != nil {
			return fmt.Errorf("complete: %w (re-read: %v)", execErr, err)
		}
		return fmt.Errorf("complete re-read: %w", err)
	}
	for rows.Next() {
		var k, st string
		var tok int64
		if err := rows.Scan(&k, &st, &tok); err != nil {
			rows.Close()
			return fmt.Errorf("complete re-read: %w", err)
		}
		states[k] = state{journal.Status(st), tok}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("complete re-read: %w", err)
	}
	for _, i := range group {
		c := cs[i]
		if applied[c.Key] {
			continue
		}
		st, ok := states[c.Key]
		switch {
		case !ok:
			out[i] = fmt.Errorf("complete %s: %w", c.Key, journal.ErrNotFound)
		case st.token != c.Token:
			out[i] = fmt.Errorf("complete %s with token %d (current %d): %w", c.Key, c.Token, st.token, journal.ErrStaleToken)
		case st.status == c.Status && (st.status.Terminal() || st.status == journal.StatusFailedRetryable):
			// Already applied by an earlier call with this token.
		case execErr != nil && journal.CanComplete(st.status, c.Status):
			return fmt.Errorf("complete: %w", execErr)
		default:
			out[i] = fmt.Errorf("complete %s from %s to %s: %w", c.Key, st.status, c.Status, journal.ErrIllegalTransition)
		}
	}
	return nil
}

// queryKeys runs a statement returning one key per row and marks those keys.
func (s *Store) queryKeys(ctx context.Context, into map[string]bool, sql string, args ...any) error {
	rows, err := s.pool.Query(ctx, sql, args...)
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
	recs, err := scanRecords(s.pool.Query(ctx, selectRecords, keys))
	if err != nil {
		return nil, fmt.Errorf("take over stale: read: %w", err)
	}
	out := make([]journal.Claim, 0, len(keys))
	for _, k := range keys {
		rec, ok := recs[k]
		if !ok || rec.LeaseOwner != owner {
			continue
		}
		out = append(out, journal.Claim{Decision: journal.Reconcile, Token: rec.LeaseToken, Attempt: rec.AttemptCount, Record: rec.Record})
	}
	return out, nil
}

// Resolve records an operator's decision on an unknown operation.
func (s *Store) Resolve(ctx context.Context, r journal.Resolution) (journal.Record, error) {
	if err := r.Validate(); err != nil {
		return journal.Record{}, err
	}
	done := make(map[string]bool, 1)
	if err := s.queryKeys(ctx, done, resolve, r.Key, string(r.Status), r.TargetObjectID, r.ErrorCode, r.Operator, r.Evidence); err != nil {
		return journal.Record{}, fmt.Errorf("resolve %s: %w", r.Key, err)
	}
	rec, err := s.Get(ctx, r.Key)
	if err != nil {
		return journal.Record{}, err
	}
	if !done[r.Key] {
		return rec, fmt.Errorf("resolve %s (status %s): only an unknown operation nobody holds can be resolved: %w",
			r.Key, rec.Status, journal.ErrIllegalTransition)
	}
	return rec, nil
}

// Get returns one operation.
func (s *Store) Get(ctx context.Context, key string) (journal.Record, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, selectRecord, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, journal.ErrNotFound)
	}
	if err != nil {
		return journal.Record{}, fmt.Errorf("get %s: %w", key, err)
	}
	return rec.Record, nil
}

// Attempts returns the attempts trail of an operation, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	rows, err := s.pool.Query(ctx, selectAttempts, key)
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
		a.Outcome = journal.Status(outcome)
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
	rows, err := s.pool.Query(ctx, listUnresolved, minRounds, limit)
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

// Purge deletes terminal operations completed before the given time.
func (s *Store) Purge(ctx context.Context, operationType string, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, purge, before, operationType, s.cfg.PurgeChunk)
		if err != nil {
			return total, fmt.Errorf("purge: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.cfg.PurgeChunk) {
			return total, nil
		}
	}
}
