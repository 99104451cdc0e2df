package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemgate/idemgate/journal"
)

// errUnexpectedKey: the server returned a key the batch did not send.
var errUnexpectedKey = errors.New("a row for a key the batch did not send")

// Claim decides every request of the batch. Its first statement
// (claimFirst) inserts the batch's new keys, each with its first attempt in
// its row, and reads the rows of the others, in one round trip: a batch of
// new keys and replays is decided there, and one of replays, conflicts and
// live leases writes nothing, so its commit waits for no WAL flush. Only
// the keys left (retryable failures, unknown outcomes, expired leases, and
// keys a concurrent batch inserted) go on to claimRound: the insert of new
// keys, the conditional take-over of re-claimable rows and a read of the
// result, pipelined as one implicit transaction. Keys whose state moved
// between those statements are claimed again, at most ClaimRounds times.
func (s *Store) Claim(ctx context.Context, reqs []journal.ClaimRequest) ([]journal.Claim, error) {
	out := make([]journal.Claim, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			return nil, err
		}
	}
	// Sorted by key, so that concurrent batches lock rows in one order and a
	// returned key's place is found by binary search. The sort is stable: of
	// equal keys the first comes first, and it alone is decided; later
	// duplicates follow journal.Repeat.
	order := byKey(len(reqs), func(i int) string { return reqs[i].Key })
	pending := make([]int, 0, len(order))
	dups := false
	for j, i := range order {
		if j > 0 && reqs[i].Key == reqs[order[j-1]].Key {
			dups = true
			continue
		}
		pending = append(pending, i)
	}

	sc := newRecordScanner()
	var err error
	for try := 0; ; try++ {
		var left []int
		left, err = s.claimFirst(ctx, reqs, pending, out, sc)
		if err == nil {
			pending = left
			break
		}
		if !retryable(err) || try >= s.cfg.Retries {
			return nil, journal.ClaimFailed(err)
		}
	}
	for round := 0; len(pending) > 0; round++ {
		var undecided []int
		for try := 0; ; try++ {
			undecided, err = s.claimRound(ctx, reqs, pending, out, sc, round+1 >= s.cfg.ClaimRounds)
			if err == nil || !retryable(err) || try >= s.cfg.Retries {
				break
			}
		}
		if err != nil {
			return nil, journal.ClaimFailed(err)
		}
		pending = undecided
	}
	if dups {
		first := order[0]
		for _, i := range order[1:] {
			if reqs[i].Key != reqs[first].Key {
				first = i
				continue
			}
			out[i] = journal.Repeat(reqs[i], out[first])
		}
	}
	return out, nil
}

// claimFirst runs claimFirst for the pending requests: it decides each key
// it inserted (executed) and each existing key whose row settles it without
// a write (a replay, a conflict or a live lease), and returns the others.
func (s *Store) claimFirst(ctx context.Context, reqs []journal.ClaimRequest, pending []int, out []journal.Claim, sc *recordScanner) ([]int, error) {
	n := len(pending)
	args := newClaimArgs(reqs, pending)
	keys := args.keys
	// found[j]: the row of keys[j] came back; live[j]: it holds a live
	// lease; inserted[j]: this statement made it.
	flags := make([]bool, 3*n)
	found, live, inserted := flags[:n:n], flags[n:2*n:2*n], flags[2*n:]
	rows, err := s.hot.Query(ctx, claimFirst, args.all()...)
	if err != nil {
		return nil, err
	}
	read := readClaims(reqs, pending, out, sc, found, live)
	sc.withInserted = true
	err = keyed(rows, keys, func(j int, rows pgx.Rows) error {
		if inserted[j] {
			return nil // the same key read from the snapshot: the insert counts
		}
		if err := read(j, rows); err != nil {
			return err
		}
		inserted[j] = sc.inserted
		return nil
	})
	sc.withInserted = false
	if err != nil {
		return nil, err
	}
	var next []int
	for j, i := range pending {
		c := &out[i]
		switch {
		case inserted[j]:
			c.Decision, c.Token, c.Attempt = journal.Execute, c.Record.LeaseToken, c.Record.AttemptCount
			continue
		case found[j]:
			if d, settled := journal.DecideExisting(&reqs[i], &c.Record, live[j]); settled {
				c.Decision = d
				continue
			}
		}
		next = append(next, i)
	}
	return next, nil
}

// claimArgs are the parallel arrays of insertNew's parameters ($1..$9):
// the pending requests, in their (sorted) order.
type claimArgs struct {
	keys, types, hashes, targets, events, approvals, owners []string
	ttls                                                    []int64
	digests                                                 []string
}

func newClaimArgs(reqs []journal.ClaimRequest, pending []int) claimArgs {
	n := len(pending)
	cols := make([]string, 8*n)
	a := claimArgs{
		keys: cols[:n:n], types: cols[n : 2*n : 2*n], hashes: cols[2*n : 3*n : 3*n], targets: cols[3*n : 4*n : 4*n],
		events: cols[4*n : 5*n : 5*n], approvals: cols[5*n : 6*n : 6*n], owners: cols[6*n : 7*n : 7*n], digests: cols[7*n:],
		ttls: make([]int64, n),
	}
	for j, i := range pending {
		r := &reqs[i]
		a.keys[j], a.types[j], a.hashes[j], a.targets[j] = r.Key, r.OperationType, r.RequestHash, r.TargetSystem
		a.events[j], a.approvals[j], a.owners[j], a.ttls[j] = r.EventID, r.ApprovalID, r.Owner, r.LeaseTTL.Milliseconds()
		a.digests[j] = r.FieldDigests
	}
	return a
}

// all is the arguments in their order.
func (a claimArgs) all() []any {
	return []any{a.keys, a.types, a.hashes, a.targets, a.events, a.approvals, a.owners, a.ttls, a.digests}
}

// claimRound runs the three claim statements for the pending requests and
// fills out. It returns the requests whose state moved under it; on the last
// round those are reported as in progress (the caller redelivers later).
func (s *Store) claimRound(ctx context.Context, reqs []journal.ClaimRequest, pending []int, out []journal.Claim, sc *recordScanner, last bool) ([]int, error) {
	n := len(pending)
	args := newClaimArgs(reqs, pending)
	keys := args.keys

	b := &pgx.Batch{}
	b.Queue(claimInsert, args.all()...)
	b.Queue(claimTakeOver, keys, args.hashes, args.owners, args.ttls)
	b.Queue(selectRecords, keys)
	br := s.hot.SendBatch(ctx, b)
	defer br.Close()

	// took[j] is what the claim statements decided for keys[j] when they
	// gave it a lease (an insert executes; a take-over follows
	// journal.TakeOver), "" when they left it alone.
	took := make([]journal.Decision, n)
	flags := make([]bool, 2*n)
	found, live := flags[:n], flags[n:]
	if err := keyedResult(br, keys, "claim insert", func(j int, _ pgx.Rows) error {
		took[j] = journal.Execute
		return nil
	}); err != nil {
		return nil, err
	}
	if err := keyedResult(br, keys, "claim take-over", func(j int, rows pgx.Rows) error {
		took[j] = journal.TakeOver(journal.Status(rows.RawValues()[1]))
		return nil
	}); err != nil {
		return nil, err
	}
	if err := keyedResult(br, keys, "claim read", readClaims(reqs, pending, out, sc, found, live)); err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("claim commit: %w", err)
	}

	var undecided []int
	for j, i := range pending {
		c := &out[i]
		if !found[j] {
			// Purged between the statements: claim it afresh.
			undecided = append(undecided, i)
			continue
		}
		if d := took[j]; d != "" {
			c.Decision, c.Token, c.Attempt = d, c.Record.LeaseToken, c.Record.AttemptCount
		} else {
			d, settled := journal.DecideExisting(&reqs[i], &c.Record, live[j])
			if !settled && !last {
				undecided = append(undecided, i)
				continue
			}
			c.Decision = d
		}
	}
	return undecided, nil
}

// readClaims returns the reader of a claim's rows (recordColumns) for
// keyed: it scans the row of keys[j] (reqs[pending[j]].Key) into its claim
// and marks it found[j], and live[j] when it holds a live lease (or hold).
func readClaims(reqs []journal.ClaimRequest, pending []int, out []journal.Claim, sc *recordScanner, found, live []bool) func(j int, rows pgx.Rows) error {
	return func(j int, rows pgx.Rows) (err error) {
		i := pending[j]
		if live[j], err = sc.scan(rows, &out[i].Record, &reqs[i]); err != nil {
			return err
		}
		out[i].Now = sc.now
		found[j] = true
		return nil
	}
}

// keyed reads rows whose first column is one of the sorted keys, calling row
// with the key's position j for each; a key not in keys fails it. It closes
// rows.
func keyed(rows pgx.Rows, keys []string, row func(j int, rows pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		j := position(keys, rows.RawValues()[0])
		if j < 0 {
			return errUnexpectedKey
		}
		if err := row(j, rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// keyedResult reads the next result of br with keyed, its errors named by
// step.
func keyedResult(br pgx.BatchResults, keys []string, step string, row func(j int, rows pgx.Rows) error) error {
	rows, err := br.Query()
	if err == nil {
		err = keyed(rows, keys, row)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	return nil
}

// byKey returns the indexes 0..n-1 ordered by key (byte order, as Go compares
// strings), equal keys in their original order.
func byKey(n int, key func(int) string) []int {
	ix := indexes(n)
	slices.SortStableFunc(ix, func(a, b int) int { return strings.Compare(key(a), key(b)) })
	return ix
}

func indexes(n int) []int {
	ix := make([]int, n)
	for i := range ix {
		ix[i] = i
	}
	return ix
}

// position returns the index of raw in the sorted keys, or -1. raw is a
// returned text value, compared without copying it.
func position(keys []string, raw []byte) int {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if keys[m] < string(raw) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(keys) && keys[lo] == string(raw) {
		return lo
	}
	return -1
}

// recordScanner reads journal rows (recordColumns) straight into their place
// in a batch's results. One scanner serves a whole batch: it reuses one
// destination list, and a text column equal to the request's value (type,
// hash, target, event, approval, owner) or to a known status shares that
// string instead of allocating a copy, so a replayed record costs about two
// allocations: its object id and its result. Not safe for concurrent use.
type recordScanner struct {
	dest                                    []any
	typ, hash, target, event, approval, own textScan
	object, code                            textScan
	status                                  statusScan
	result                                  []byte
	leaseUntil, completedAt, raisedAt       pgtype.Timestamptz
	live                                    bool
	// withInserted: the rows end with claimFirst's inserted column, read
	// into inserted.
	withInserted, inserted bool
	// now is the database clock of the last row scanned.
	now time.Time
}

func newRecordScanner() *recordScanner {
	sc := &recordScanner{}
	// The order of recordColumns; the key (first) is read raw by the caller,
	// and the record's fields are pointed at before each row.
	sc.dest = []any{nil, &sc.typ, &sc.hash, &sc.status, &sc.target,
		&sc.object, &sc.result, &sc.code, nil,
		&sc.event, &sc.approval, &sc.own, nil, &sc.leaseUntil,
		nil, nil, nil, &sc.completedAt,
		nil, &sc.raisedAt, nil,
		&sc.live, &sc.now, &sc.inserted}
	return sc
}

// scan reads the current row into rec, the record of request r, and reports
// whether the row holds a live lease (or hold); sc.now is then the database
// clock of the read. rec.Key is r.Key: the caller found the row by that key.
func (sc *recordScanner) scan(rows pgx.Rows, rec *journal.Record, r *journal.ClaimRequest) (bool, error) {
	rec.Key = r.Key
	sc.typ.set(&rec.OperationType, r.OperationType)
	sc.hash.set(&rec.RequestHash, r.RequestHash)
	sc.status.dst = &rec.Status
	sc.target.set(&rec.TargetSystem, r.TargetSystem)
	sc.object.set(&rec.TargetObjectID, "")
	sc.code.set(&rec.ErrorCode, "")
	sc.event.set(&rec.EventID, r.EventID)
	sc.approval.set(&rec.ApprovalID, r.ApprovalID)
	sc.own.set(&rec.LeaseOwner, r.Owner)
	sc.dest[8], sc.dest[12], sc.dest[14] = &rec.AttemptCount, &rec.LeaseToken, &rec.ReconcileRounds
	sc.dest[15], sc.dest[16] = &rec.CreatedAt, &rec.UpdatedAt
	sc.dest[18], sc.dest[20] = &rec.ReconcileRoundsTotal, &rec.EffectPossible
	dest := sc.dest[:len(sc.dest)-1]
	if sc.withInserted {
		dest = sc.dest
	}
	if err := rows.Scan(dest...); err != nil {
		return false, err
	}
	rec.Result = nil
	if len(sc.result) > 0 {
		rec.Result = sc.result // a fresh copy per row
	}
	sc.result = nil
	rec.LeaseUntil, rec.CompletedAt, rec.RaisedAt = time.Time{}, time.Time{}, time.Time{}
	if sc.leaseUntil.Valid {
		rec.LeaseUntil = sc.leaseUntil.Time
	}
	if sc.completedAt.Valid {
		rec.CompletedAt = sc.completedAt.Time
	}
	if sc.raisedAt.Valid {
		rec.RaisedAt = sc.raisedAt.Time
	}
	return sc.live, nil
}

// textScan scans a text column into dst, sharing known when equal to it.
type textScan struct {
	dst   *string
	known string
}

func (t *textScan) set(dst *string, known string) { t.dst, t.known = dst, known }

// ScanBytes implements pgtype.BytesScanner; src is only valid during the call.
func (t *textScan) ScanBytes(src []byte) error {
	if string(src) == t.known {
		*t.dst = t.known
	} else {
		*t.dst = string(src)
	}
	return nil
}

// statusScan scans the status column into one of the status constants.
type statusScan struct{ dst *journal.Status }

var statuses = [...]journal.Status{journal.StatusSucceeded, journal.StatusStarted, journal.StatusFailedFinal,
	journal.StatusFailedRetryable, journal.StatusUnknown}

// ScanBytes implements pgtype.BytesScanner.
func (t *statusScan) ScanBytes(src []byte) error {
	for _, st := range statuses {
		if string(src) == string(st) {
			*t.dst = st
			return nil
		}
	}
	*t.dst = journal.Status(src)
	return nil
}

// TakeOverStale takes over unknown outcomes and expired leases for the
// reconciler.
func (s *Store) TakeOverStale(ctx context.Context, owner string, ttl time.Duration, limit int) ([]journal.Claim, error) {
	if err := journal.ValidateTakeOver(owner, ttl, limit); err != nil {
		return nil, err
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
	recs, err := s.readStored(ctx, selectRecords, keys)
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
			Record: rec.Record, Now: rec.Now})
	}
	return out, nil
}
