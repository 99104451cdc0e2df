package sqljournal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// Query runs a statement and hands its rows to read; the engine closes them
// after.
type Query func(ctx context.Context, sql string, args []any, read func(Rows) error) error

// ReadSQL are an engine's statements for a Reader, each with its
// parameters in the order given.
type ReadSQL struct {
	// Record reads one stored row (RecordColumns, lease_live, the clock):
	// key.
	Record string
	// FieldDigests reads a key's per-field digests as text: key.
	FieldDigests string
	// Attempts reads a key's attempts trail (ScanAttempt), oldest first: key.
	Attempts string
	// ListUnresolved reads stored rows: minimum rounds, limit.
	ListUnresolved string
	// ListIdleRetryable reads stored rows: idle milliseconds, limit.
	ListIdleRetryable string
	// AttemptCounts counts attempts finished since (ScanAttemptCount): since.
	AttemptCounts string
	// LeaseHolders lists the live lease holders (ScanLeaseHolder).
	LeaseHolders string
	// TraceIDs reads a key's lease tokens and trace ids: key.
	TraceIDs string
	// Searches serve the console's searches, by kind (see Search).
	Searches [SearchKinds]string
}

// Reader is an engine's plain reads, the same logic on every engine: the
// reads of journal.Store (Get, FieldDigests, Attempts, the lists),
// journal.Browser and journal.AttemptTraces' AttemptTraceIDs. An engine's
// Store embeds it; T is the engine's TimeColumn.
type Reader[T any, P TimeColumn[T]] struct {
	query  Query
	sql    *ReadSQL
	at     func(time.Time) any
	ranges func([]journal.IntentRange) []any
}

// NewReader returns the reads of an engine that runs statements with query,
// turns a time into an argument with at and an intent's key ranges into
// arguments with ranges.
func NewReader[T any, P TimeColumn[T]](query Query, sql *ReadSQL, at func(time.Time) any,
	ranges func([]journal.IntentRange) []any) Reader[T, P] {
	return Reader[T, P]{query: query, sql: sql, at: at, ranges: ranges}
}

// errNoRow: a read of one row found none.
var errNoRow = errors.New("no row")

// one reads the first row of a statement with scan; none is errNoRow.
func (r Reader[T, P]) one(ctx context.Context, sql string, args []any, scan func(Row) error) error {
	return r.query(ctx, sql, args, func(rows Rows) error {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return errNoRow
		}
		return scan(rows)
	})
}

// all reads every row of a statement with scan.
func all[R any, T any, P TimeColumn[T]](ctx context.Context, r Reader[T, P], scan func(Row) (R, error), sql string, args ...any) ([]R, error) {
	var out []R
	err := r.query(ctx, sql, args, func(rows Rows) (err error) {
		out, err = Collect(rows, scan)
		return err
	})
	return out, err
}

// keyError names key in err; no row is journal.ErrNotFound.
func keyError(what, key string, err error) error {
	if errors.Is(err, errNoRow) {
		return fmt.Errorf("%s %s: %w", what, key, journal.ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", what, key, err)
}

// Get returns one operation.
func (r Reader[T, P]) Get(ctx context.Context, key string) (journal.Record, error) {
	var rec journal.Record
	err := r.one(ctx, r.sql.Record, []any{key}, func(row Row) (err error) {
		rec, err = StoredRecord[T, P](row)
		return err
	})
	if err != nil {
		return journal.Record{}, keyError("get", key, err)
	}
	return rec, nil
}

// FieldDigests implements journal.Store.
func (r Reader[T, P]) FieldDigests(ctx context.Context, key string) (string, error) {
	var d string
	err := r.one(ctx, r.sql.FieldDigests, []any{key}, func(row Row) error { return row.Scan(&d) })
	if err != nil {
		return "", keyError("field digests", key, err)
	}
	return d, nil
}

// Attempts returns the attempts trail of an operation, oldest first.
func (r Reader[T, P]) Attempts(ctx context.Context, key string) ([]journal.Attempt, error) {
	out, err := all(ctx, r, ScanAttempt[T, P], r.sql.Attempts, key)
	if err != nil {
		return nil, fmt.Errorf("attempts %s: %w", key, err)
	}
	return out, nil
}

// ListUnresolved lists unknown operations that reconciliation could not
// settle.
func (r Reader[T, P]) ListUnresolved(ctx context.Context, minRounds, limit int) ([]journal.Record, error) {
	out, err := all(ctx, r, StoredRecord[T, P], r.sql.ListUnresolved, minRounds, journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list unresolved: %w", err)
	}
	return out, nil
}

// ListIdleRetryable lists retryable failures idle for at least idle.
func (r Reader[T, P]) ListIdleRetryable(ctx context.Context, idle time.Duration, limit int) ([]journal.Record, error) {
	out, err := all(ctx, r, StoredRecord[T, P], r.sql.ListIdleRetryable, idle.Milliseconds(), journal.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list idle retryable: %w", err)
	}
	return out, nil
}

// SearchStatement picks the statement that serves q and its arguments.
func (r Reader[T, P]) SearchStatement(q journal.SearchQuery) (string, []any) {
	kind, args := Search(q, r.at, r.ranges)
	return r.sql.Searches[kind], args
}

// Search implements journal.Browser.
func (r Reader[T, P]) Search(ctx context.Context, q journal.SearchQuery) ([]journal.Record, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	stmt, args := r.SearchStatement(q)
	out, err := all(ctx, r, ScanRecord[T, P], stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return out, nil
}

// ExplainSearch returns the engine's plan for q's statement, one line a
// step: explain is the engine's EXPLAIN prefix, step reads a step's text
// from a row of the plan. Tests check with it that a search reads an index.
func (r Reader[T, P]) ExplainSearch(ctx context.Context, q journal.SearchQuery, explain string, step func(Row) (string, error)) (string, error) {
	if err := q.Validate(); err != nil {
		return "", err
	}
	stmt, args := r.SearchStatement(q)
	steps, err := all(ctx, r, step, explain+stmt, args...)
	if err != nil {
		return "", fmt.Errorf("explain search: %w", err)
	}
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s + "\n")
	}
	return b.String(), nil
}

// StatusCounts implements journal.Browser.
func (r Reader[T, P]) StatusCounts(ctx context.Context) ([]journal.StatusCount, error) {
	out, err := all(ctx, r, ScanStatusCount, StatusCounts)
	if err != nil {
		return nil, fmt.Errorf("status counts: %w", err)
	}
	return out, nil
}

// AttemptCounts implements journal.Browser.
func (r Reader[T, P]) AttemptCounts(ctx context.Context, since time.Time) ([]journal.AttemptCount, error) {
	out, err := all(ctx, r, ScanAttemptCount, r.sql.AttemptCounts, r.at(since))
	if err != nil {
		return nil, fmt.Errorf("attempt counts: %w", err)
	}
	return out, nil
}

// LeaseHolders implements journal.Browser.
func (r Reader[T, P]) LeaseHolders(ctx context.Context) ([]journal.LeaseHolder, error) {
	out, err := all(ctx, r, ScanLeaseHolder[T, P], r.sql.LeaseHolders)
	if err != nil {
		return nil, fmt.Errorf("lease holders: %w", err)
	}
	return out, nil
}

// AttemptTraceIDs returns the recorded trace ids of key's attempts by
// token.
func (r Reader[T, P]) AttemptTraceIDs(ctx context.Context, key string) (map[int64]string, error) {
	var out map[int64]string
	err := r.query(ctx, r.sql.TraceIDs, []any{key}, func(rows Rows) (err error) {
		out, err = TraceIDs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attempt traces %s: %w", key, err)
	}
	return out, nil
}
