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
// the payment_id filter). A lane reads for every request that is waiting
// when a read starts: the requests whose windows overlap become one read
// of their union, and each request takes from it the objects with its key
// created inside its own window, exactly what a read of that window alone
// would have returned. A request that arrives while a read runs waits for
// the next one, which starts when that one ends: every read a request
// counts on began after the request was made, so it sees everything the
// key's calls committed before the lookup was asked (group commit, applied
// to reads). Nothing relies on the order of a list's items: a request is
// answered when the whole union was read, or its page budget ran out.
//
// A read of n requests may use n × LookupMaxPages pages: the union of
// overlapping windows holds no object that is not in one of them, so a
// request that one read of its own window would have finished within the
// cap is finished within the shared budget too.
//
// A lookup that gives up (its context ends) is answered at once, and no
// read goes on for it alone: a lane leaves out the requests whose lookup
// has gone when it starts a read, and a read stops before its next page
// once every lookup it serves has gone.

// scanRequest is one lookup's share of a read: the objects with key created
// from from to to (inclusive, to the millisecond the list's created_at
// carries; a zero to: up to the read).
type scanRequest struct {
	key      string
	from, to time.Time
	// rest says that an empty, complete read of from..to is not the answer
	// yet: the rest of the list, from to up to a read that starts later,
	// must be read too (the second part of Adapter.scan).
	rest bool
	// ctx carries the lookup's values (its trace) to the reads, without
	// its cancellation: the first request of a group lends its own.
	ctx  context.Context
	done chan scanAnswer
	// gone says that the lookup gave up: nothing is read for it any more.
	gone atomic.Bool

	matches []object        // newest first, as read
	seen    map[string]bool // ids counted
}

// scanAnswer is what a request's reads found: the objects with its key,
// oldest first, and whether its whole window was read.
type scanAnswer struct {
	matches  []object
	complete bool
	err      error
}

// listPager reads one page of a list.
type listPager func(ctx context.Context, path string, q url.Values) ([]object, string, error)

// scanLanes runs the shared reads, one lane per list.
type scanLanes struct {
	maxPages int
	read     listPager

	mu    sync.Mutex
	lanes map[string]*scanLane
}

// scanLane is the requests waiting for the next read of one list; running
// says a goroutine is reading it and will take them.
type scanLane struct {
	path    string
	filter  url.Values
	pending []*scanRequest
	running bool
}

func newScanLanes(maxPages int, read listPager) *scanLanes {
	return &scanLanes{maxPages: maxPages, read: read, lanes: map[string]*scanLane{}}
}

// scan hands r to the lane of path?filter and waits for its answer, or for
// ctx. The reads run under a context of their own: a lookup that gives up
// leaves the others it shares a read with to their answers.
func (s *scanLanes) scan(ctx context.Context, path string, filter url.Values, r *scanRequest) ([]object, bool, error) {
	r.ctx, r.done, r.seen = context.WithoutCancel(ctx), make(chan scanAnswer, 1), map[string]bool{}
	s.enqueue(path, filter, r)
	select {
	case a := <-r.done:
		return a.matches, a.complete, a.err
	case <-ctx.Done():
		r.gone.Store(true)
		return nil, false, adapters.NoEffect(ctx.Err())
	}
}

func (s *scanLanes) enqueue(path string, filter url.Values, r *scanRequest) {
	name := path + "?" + filter.Encode()
	s.mu.Lock()
	defer s.mu.Unlock()
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
// group of overlapping windows is read concurrently with the others.
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
					l.pending = append(l.pending, r) // its rest, in the next read
					s.mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}

// overlapping splits requests into groups whose windows overlap (a zero to
// reaches up to the read), each group's union one interval.
func overlapping(rs []*scanRequest) [][]*scanRequest {
	top := func(r *scanRequest) time.Time {
		if r.to.IsZero() {
			return time.Unix(1<<62, 0)
		}
		return r.to
	}
	slices.SortFunc(rs, func(a, b *scanRequest) int { return a.from.Compare(b.from) })
	var groups [][]*scanRequest
	var end time.Time
	for _, r := range rs {
		if len(groups) == 0 || r.from.After(end) {
			groups = append(groups, nil)
			end = top(r)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], r)
		if t := top(r); t.After(end) {
			end = t
		}
	}
	return groups
}

// readUnion reads the union of group's windows and answers each request
// from it. It returns the requests whose first part came back empty and
// complete and that must read the rest of the list next.
func (s *scanLanes) readUnion(path string, filter url.Values, group []*scanRequest) (rest []*scanRequest) {
	const layout = "2006-01-02T15:04:05.000Z"
	from, to := group[0].from, group[0].to
	byKey := make(map[string][]*scanRequest, len(group))
	for _, r := range group {
		from = minTime(from, r.from)
		if to.IsZero() || r.to.IsZero() {
			to = time.Time{}
		} else if r.to.After(to) {
			to = r.to
		}
		byKey[r.key] = append(byKey[r.key], r)
	}
	q := url.Values{}
	for k, v := range filter {
		q[k] = v
	}
	q.Set("created_at.gte", from.UTC().Format(layout))
	if !to.IsZero() {
		q.Set("created_at.lte", to.UTC().Format(layout))
	}
	q.Set("limit", "100")
	complete := false
	for page := 0; page < s.maxPages*len(group); page++ {
		if !slices.ContainsFunc(group, func(r *scanRequest) bool { return !r.abandoned() }) {
			return nil // every lookup it served has gone
		}
		items, next, err := s.read(group[0].ctx, path, q)
		if err != nil {
			for _, r := range group {
				r.done <- scanAnswer{err: err}
			}
			return nil
		}
		for _, o := range items {
			for _, r := range byKey[o.Metadata[MetaKey]] {
				if !r.seen[o.ID] && r.holds(o) {
					r.seen[o.ID] = true
					r.matches = append(r.matches, o)
				}
			}
		}
		if next == "" {
			complete = true
			break
		}
		q.Set("cursor", next)
	}
	for _, r := range group {
		if complete && len(r.matches) == 0 && r.rest {
			r.from, r.to, r.rest = r.to, time.Time{}, false
			rest = append(rest, r)
			continue
		}
		slices.Reverse(r.matches) // newest first → oldest first
		r.done <- scanAnswer{matches: r.matches, complete: complete}
	}
	return rest
}

// abandoned reports whether r's lookup gave up.
func (r *scanRequest) abandoned() bool { return r.gone.Load() }

// holds reports whether o was created inside r's window, to the
// millisecond the list carries (as the list's own created_at filter
// compares). An object whose created_at cannot be read counts as inside:
// it carries the key, and a lookup must not miss it.
func (r *scanRequest) holds(o object) bool {
	at, err := time.Parse(time.RFC3339Nano, o.CreatedAt)
	if err != nil {
		return true
	}
	if at.Before(r.from.Truncate(time.Millisecond)) {
		return false
	}
	return r.to.IsZero() || !at.After(r.to.Truncate(time.Millisecond))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
