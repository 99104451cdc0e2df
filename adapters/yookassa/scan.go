package yookassa

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// Lookups share their reads of a list. YooKassa's lists cannot filter by
// metadata, so a lookup reads every object created while its key's calls
// ran; when answers are lost under load, many lookups at once want nearly
// the same minutes of the same list, and reading them once per key was
// most of what a lookup cost the daemon and the target (each page is one
// request and a hundred objects to encode and decode).
//
// So a lookup is a scanRequest handed to the lane of its list (the path and
// the payment_id filter), with the parts of its window to read in order
// (Adapter.plan). A lane reads for every request that is waiting when a
// read starts: the requests whose current parts overlap become one read of
// their union, and each request takes from it the objects with its key
// created inside its own window, exactly what a read of that part alone
// would have returned. A request that arrives while a read runs waits for
// the next one, which starts when that one ends: every read a request
// counts on began after the request was made, so it sees everything the
// key's calls committed before the lookup was asked (group commit, applied
// to reads). A request whose part was read goes on with its next part in
// the next read.
//
// The lists are sorted by creation time, newest first ([OK]
// yookassa.ru/developers/using-api/lists), so once a page ends at
// created_at t everything in the read's window from t + 1 ms up was read:
// a part below that is done, and a request is charged only for the pages
// that covered its part (LookupMaxPages a round). Should a page ever come
// out of order, the read counts nothing as done before its end.
//
// What a round read without finding the key is kept (progress): the spans
// of the window read completely, once no object with the key can join them
// any more: the key's calls ended and the window's end (LookupLate after
// them) is past, or the span ends LookupSkew + LookupLate before the
// read's start (YooKassa stamps created_at when it receives a request and
// settles it within 30 seconds). The next round of the same key's lookup
// reads only the rest, so a window of any length is read to its end in as
// many rounds as its pages need. An answer that settles the key drops its
// progress.
//
// A lookup that gives up (its context ends) is answered at once, and no
// read goes on for it alone: a lane leaves out the requests whose lookup
// has gone when it starts a read, and a read stops before its next page
// once every lookup it serves has gone. What it read until then is kept.

// scanRequest is one lookup's share of the reads.
type scanRequest struct {
	key string
	// single: the first match ends the read (Adapter.oneObject); closed:
	// no payment with the key can appear any more (window.closed).
	single, closed bool
	// parts still to read, the current one first.
	parts []part
	// pages left this round; memo names its progress entry.
	pages int
	memo  string
	// ctx carries the lookup's values (its trace) to the reads, without
	// its cancellation: the first request of a group lends its own.
	ctx  context.Context
	done chan scanAnswer
	// gone says that the lookup gave up: nothing is read for it any more.
	gone atomic.Bool

	matches []object        // as read
	seen    map[string]bool // ids counted
}

// scanAnswer is what a request's reads found: the objects with its key,
// oldest first, and whether its window was read as far as its plan asks.
type scanAnswer struct {
	matches  []object
	complete bool
	err      error
}

// listPager reads one page of a list.
type listPager func(ctx context.Context, path string, q url.Values) ([]object, string, error)

// scanLanes runs the shared reads, one lane per list, and keeps the
// progress of the keys whose lookups are not settled yet.
type scanLanes struct {
	maxPages int
	read     listPager
	clock    func() time.Time
	// seal: a span read at t counts as read for good up to t − seal.
	seal time.Duration
	// keep: progress unused this long goes when room is needed.
	keep time.Duration

	mu       sync.Mutex
	lanes    map[string]*scanLane
	progress map[string]*progress
}

// scanLane is the requests waiting for the next read of one list; running
// says a goroutine is reading it and will take them.
type scanLane struct {
	path    string
	filter  url.Values
	pending []*scanRequest
	running bool
}

func newScanLanes(maxPages int, read listPager, clock func() time.Time, seal, keep time.Duration) *scanLanes {
	return &scanLanes{maxPages: maxPages, read: read, clock: clock, seal: seal, keep: keep,
		lanes: map[string]*scanLane{}, progress: map[string]*progress{}}
}

// scan hands r to the lane of path?filter and waits for its answer, or for
// ctx. The reads run under a context of their own: a lookup that gives up
// leaves the others it shares a read with to their answers.
func (s *scanLanes) scan(ctx context.Context, path string, filter url.Values, r *scanRequest) ([]object, bool, error) {
	r.ctx, r.done, r.seen = context.WithoutCancel(ctx), make(chan scanAnswer, 1), map[string]bool{}
	r.pages = s.maxPages
	name := path + "?" + filter.Encode()
	r.memo = name + "\x00" + r.key
	s.mu.Lock()
	if p := s.progress[r.memo]; p != nil {
		var parts []part
		for _, pt := range r.parts {
			parts = append(parts, p.unread(pt)...)
		}
		r.parts, p.used = parts, s.clock()
	}
	ans, settled := r.settle()
	if !settled {
		s.enqueueLocked(name, path, filter, r)
	}
	s.mu.Unlock()
	if settled {
		s.finish(r, ans) // read completely before
	}
	select {
	case a := <-r.done:
		return a.matches, a.complete, a.err
	case <-ctx.Done():
		r.gone.Store(true)
		return nil, false, adapters.NoEffect(ctx.Err())
	}
}

func (s *scanLanes) enqueueLocked(name, path string, filter url.Values, r *scanRequest) {
	l := s.lanes[name]
	if l == nil {
		l = &scanLane{path: path, filter: filter}
		s.lanes[name] = l
	}
	l.pending = append(l.pending, r)
	if !l.running {
		l.running = true
		go s.run(name, l)
	}
}

// run reads for the lane's waiting requests until none is left; each
// group of overlapping parts is read concurrently with the others.
func (s *scanLanes) run(name string, l *scanLane) {
	for {
		s.mu.Lock()
		batch := slices.DeleteFunc(l.pending, (*scanRequest).abandoned)
		l.pending = nil
		if len(batch) == 0 {
			l.running = false
			delete(s.lanes, name)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		var wg sync.WaitGroup
		for _, group := range overlapping(batch) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, r := range s.readUnion(l.path, l.filter, group) {
					s.mu.Lock()
					l.pending = append(l.pending, r) // its next part, in the next read
					s.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}

// overlapping splits requests into groups whose current parts overlap,
// each group's union one interval.
func overlapping(rs []*scanRequest) [][]*scanRequest {
	slices.SortFunc(rs, func(a, b *scanRequest) int { return cmpInt(a.parts[0].lo, b.parts[0].lo) })
	var groups [][]*scanRequest
	var end int64
	for _, r := range rs {
		if len(groups) == 0 || r.parts[0].lo > end {
			groups = append(groups, nil)
			end = r.parts[0].hi
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], r)
		end = max(end, r.parts[0].hi)
	}
	return groups
}

// readUnion reads the union of the group's current parts, newest first,
// and settles each request from it as far as it goes. It returns the
// requests whose part was read and that go on with their next one.
func (s *scanLanes) readUnion(path string, filter url.Values, group []*scanRequest) (next []*scanRequest) {
	const layout = "2006-01-02T15:04:05.000Z"
	start := s.clock()
	lo, hi := group[0].parts[0].lo, group[0].parts[0].hi
	byKey := make(map[string][]*scanRequest, len(group))
	for _, r := range group {
		lo, hi = min(lo, r.parts[0].lo), max(hi, r.parts[0].hi)
		byKey[r.key] = append(byKey[r.key], r)
	}
	q := url.Values{}
	for k, v := range filter {
		q[k] = v
	}
	q.Set("created_at.gte", time.UnixMilli(lo).UTC().Format(layout))
	if hi != openEnd {
		q.Set("created_at.lte", time.UnixMilli(hi).UTC().Format(layout))
	}
	q.Set("limit", "100")
	active := slices.Clone(group)
	// floor: every object from floor to hi was read (openEnd: none yet);
	// prev: where the pages read so far ended.
	floor, prev, last, ordered := openEnd, openEnd, openEnd, true
	defer func() {
		for _, r := range active { // gone: keep what was read for them
			s.record(r, span{max(r.parts[0].lo, floor), r.parts[0].hi}, start)
		}
	}()
	for len(active) > 0 {
		if !slices.ContainsFunc(active, func(r *scanRequest) bool { return !r.abandoned() }) {
			return next // every lookup it serves has gone
		}
		items, cursor, err := s.read(active[0].ctx, path, q)
		if err != nil {
			for _, r := range active {
				s.record(r, span{max(r.parts[0].lo, floor), r.parts[0].hi}, start)
				s.finish(r, scanAnswer{err: err})
			}
			active = nil
			return next
		}
		low := prev
		for _, o := range items {
			t, ok := createdMs(o)
			if ok {
				ordered = ordered && t <= last
				last, low = t, min(low, t)
			}
			for _, r := range byKey[o.Metadata[MetaKey]] {
				if !r.seen[o.ID] && r.inWindow(t, ok) {
					r.seen[o.ID] = true
					r.matches = append(r.matches, o)
				}
			}
		}
		switch {
		case cursor == "":
			floor, low = lo, lo
		case ordered && low != openEnd:
			floor = min(floor, low+1)
		}
		page := span{low, prev}
		keep := active[:0]
		for _, r := range active {
			cur := r.parts[0]
			if page.lo <= cur.hi && page.hi >= cur.lo {
				r.pages--
			}
			switch {
			case r.single && len(r.matches) > 0:
				s.finish(r, r.answer(true))
			case floor <= cur.lo: // its part was read
				s.record(r, cur.span, start)
				r.parts = r.parts[1:]
				if cur.stage && len(r.matches) > 0 {
					s.finish(r, r.answer(true))
				} else if ans, settled := r.settle(); settled {
					s.finish(r, ans)
				} else {
					next = append(next, r)
				}
			case r.abandoned():
				keep = append(keep, r) // recorded when the read ends
			case r.pages <= 0:
				s.record(r, span{max(cur.lo, floor), cur.hi}, start)
				s.finish(r, r.answer(false))
			default:
				keep = append(keep, r)
			}
		}
		active = keep
		prev = low
		if cursor == "" {
			return next
		}
		q.Set("cursor", cursor)
	}
	return next
}

// settle drops the empty parts at the head of r's plan and reports
// whether r is answered without reading more, and with what.
func (r *scanRequest) settle() (scanAnswer, bool) {
	for {
		if r.single && len(r.matches) > 0 {
			return r.answer(true), true
		}
		if len(r.parts) == 0 {
			return r.answer(true), true
		}
		if !r.parts[0].empty() {
			return scanAnswer{}, false
		}
		p := r.parts[0]
		r.parts = r.parts[1:]
		if p.stage && len(r.matches) > 0 {
			return r.answer(true), true
		}
	}
}

// answer is r's matches, oldest first.
func (r *scanRequest) answer(complete bool) scanAnswer {
	m := slices.Clone(r.matches)
	slices.Reverse(m) // read newest first
	slices.SortStableFunc(m, func(a, b object) int {
		ta, oka := createdMs(a)
		tb, okb := createdMs(b)
		if !oka || !okb {
			return 0
		}
		return cmpInt(ta, tb)
	})
	return scanAnswer{matches: m, complete: complete}
}

// finish answers r and, when the answer settles its key (found, or the
// whole window read), drops the key's progress.
func (s *scanLanes) finish(r *scanRequest, a scanAnswer) {
	if a.err == nil && (a.complete || len(a.matches) > 0) {
		s.mu.Lock()
		delete(s.progress, r.memo)
		s.mu.Unlock()
	}
	r.done <- a
}

// record keeps sp as read for r's key by a read that started at start,
// up to where no object with the key can join it any more: all of it once
// r's window is closed, else up to seal before start. Only a request that
// found nothing records: a span kept holds no object with the key, so a
// later round that skips it misses none.
func (s *scanLanes) record(r *scanRequest, sp span, start time.Time) {
	if !r.closed {
		sp.hi = min(sp.hi, ms(start.Add(-s.seal)))
	}
	if sp.empty() || len(r.matches) > 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	p := s.progress[r.memo]
	if p == nil {
		if len(s.progress) >= maxProgress {
			s.evictLocked(now)
		}
		p = &progress{}
		s.progress[r.memo] = p
	}
	p.add(sp)
	p.used = now
}

// evictLocked drops the progress unused for keep, or else the least
// recently used entry.
func (s *scanLanes) evictLocked(now time.Time) {
	oldest, at := "", now
	for name, p := range s.progress {
		if now.Sub(p.used) > s.keep {
			delete(s.progress, name)
			continue
		}
		if p.used.Before(at) || oldest == "" {
			oldest, at = name, p.used
		}
	}
	if len(s.progress) >= maxProgress {
		delete(s.progress, oldest)
	}
}

// abandoned reports whether r's lookup gave up.
func (r *scanRequest) abandoned() bool { return r.gone.Load() }

// inWindow reports whether an object created at t (ok: its created_at
// could be read) belongs to r: inside its current part, or, for a
// one-payment read, inside any part still to read. An object whose
// created_at cannot be read counts as inside: it carries the key, and a
// lookup must not miss it.
func (r *scanRequest) inWindow(t int64, ok bool) bool {
	if !ok {
		return true
	}
	if !r.single {
		return r.parts[0].holds(t)
	}
	return slices.ContainsFunc(r.parts, func(p part) bool { return p.holds(t) })
}

// createdMs is o's created_at in milliseconds since the epoch.
func createdMs(o object) (int64, bool) {
	at, err := time.Parse(time.RFC3339Nano, o.CreatedAt)
	if err != nil {
		return 0, false
	}
	return ms(at), true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
