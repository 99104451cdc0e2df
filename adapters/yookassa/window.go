package yookassa

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// What a lookup reads. YooKassa's lists cannot filter by metadata, so a
// lookup reads the payments created while the key's calls ran and matches
// metadata.idemgate_key. Its cost is the number of payments in that window,
// which grows with the shop's rate; so the window is bounded by the calls
// themselves (never by the moment of the lookup), the part where the
// payment most likely is comes first, the first match ends the read where
// one key cannot have made two payments, and a window longer than a round
// can read is read over several rounds (progress, below).

// span is a range of created_at in milliseconds since the epoch, both ends
// included; hi == openEnd reaches up to the read.
type span struct{ lo, hi int64 }

const openEnd = int64(math.MaxInt64)

func ms(t time.Time) int64 { return t.UnixMilli() }

func (s span) empty() bool { return s.lo > s.hi }

// holds reports whether created_at t (milliseconds) is inside s.
func (s span) holds(t int64) bool { return t >= s.lo && t <= s.hi }

// part is a span a lookup reads as one query (created_at.gte/.lte),
// newest first. stage marks the end of the calls' own window in a full
// read: a match there ends the scan (it holds every object older than its
// end, so the oldest match is among them).
type part struct {
	span
	stage bool
}

// coreMargin widens the calls' own time [first sight, last call's end]
// into the core a one-payment read starts with: the clocks of a journal
// and of YooKassa kept by NTP differ by far less. Only the order of the
// reads depends on it; LookupSkew still bounds the window.
const coreMargin = time.Second

// oneObject reports whether the key's calls can have made one payment at
// most. YooKassa honours an Idempotence-Key for KeyLifetime after the
// first request that carried it: when no connector that drops the key is
// declared, and every call for the key reached YooKassa within that time
// of the key's first sight (LookupSkew either side for the clocks, a call
// for the way there), each repeat got the first payment back instead of a
// new one.
func (a *Adapter) oneObject(att adapters.Attempt, ok bool, now time.Time) bool {
	if a.cfg.ConnectorDropsKey || !ok || att.Since.IsZero() {
		return false
	}
	end := att.Until
	if end.IsZero() {
		end = now // a call may still run
	}
	return end.Sub(att.Since)+2*a.cfg.LookupSkew+a.cfg.Timeout < KeyLifetime
}

// window is what a lookup reads: its parts in order; single, whether the
// first match ends it (oneObject); closed, whether no payment of the key's
// calls can appear in the lists any more (they ended, and the window's
// end, LookupLate after them, is past).
type window struct {
	parts          []part
	single, closed bool
}

// plan is the window of a lookup made at now.
//
// Without the key's first sight (a direct call) it is one part from
// LookupWindow ago up to the read. Otherwise an object the key's calls
// made was created from Since − LookupSkew to Until + LookupSkew (the
// calls' window; while the worker knows no end, a call past Since), or,
// for a request YooKassa received after its call gave up, up to LookupLate
// later: the window ends there once that time is past, and later payments
// are never read, however long after the calls the lookup comes.
//
// A full read (several payments possible) reads the calls' window, then,
// without a match there, the rest. A one-payment read starts with the
// core, the calls' own time within coreMargin: its first part runs from
// the core's top down to the window's start (newest first, the core comes
// first), the second from the core's top up to the window's end.
func (a *Adapter) plan(ctx context.Context, now time.Time) window {
	att, ok := adapters.AttemptFrom(ctx)
	if !ok || att.Since.IsZero() {
		return window{parts: []part{{span: span{ms(a.cfg.From(ctx, now)), openEnd}}}}
	}
	single := a.oneObject(att, ok, now)
	skew := a.cfg.LookupSkew
	from, nowMs := ms(att.Since.Add(-skew)), ms(now)
	calls, end, top := openEnd, ms(att.Since.Add(skew+a.cfg.Timeout)), openEnd
	if !att.Until.IsZero() {
		calls, end = ms(att.Until), ms(att.Until.Add(skew))
		if t := ms(att.Until.Add(skew + a.cfg.LookupLate)); t < nowMs {
			top = t
		}
	}
	if end >= nowMs || end <= from {
		end = openEnd
	}
	if !single {
		parts := []part{{span: span{from, end}, stage: true}}
		if end != openEnd && top > end {
			parts = append(parts, part{span: span{end + 1, top}})
		}
		return window{parts: parts, closed: top != openEnd}
	}
	core := end
	if calls != openEnd {
		core = min(core, calls+min(skew, coreMargin).Milliseconds())
	}
	parts := []part{{span: span{from, core}}}
	if core != openEnd && top > core {
		parts = append(parts, part{span: span{core + 1, top}})
	}
	return window{parts: parts, single: true, closed: top != openEnd}
}

// progress is what the reads of one key's list have covered without
// finding the key: spans read completely and sealed (no object with the
// key can join them any more: the window is closed, or they end LookupSkew
// + LookupLate before the read began), kept between the rounds of a lookup
// so that the next round reads only the rest. A replica keeps its own.
type progress struct {
	read []span // sorted, disjoint, not adjacent
	used time.Time
}

// maxProgress bounds how many keys' progress a replica keeps; the least
// recently used goes first.
const maxProgress = 10000

// add records s as read.
func (p *progress) add(s span) {
	if s.empty() {
		return
	}
	out := make([]span, 0, len(p.read)+1)
	for _, r := range p.read {
		switch {
		case r.hi < s.lo-1 || r.lo > s.hi+1:
			out = append(out, r)
		default: // overlapping or adjacent: merge
			s = span{min(s.lo, r.lo), max(s.hi, r.hi)}
		}
	}
	out = append(out, s)
	slices.SortFunc(out, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	p.read = out
}

// unread splits pt into the spans of it not read yet, newest first; each
// keeps pt's stage on the oldest (last) piece only.
func (p *progress) unread(pt part) []part {
	gaps := []span{pt.span}
	for _, r := range p.read {
		var next []span
		for _, g := range gaps {
			if r.hi < g.lo || r.lo > g.hi {
				next = append(next, g)
				continue
			}
			if r.lo > g.lo {
				next = append(next, span{g.lo, r.lo - 1})
			}
			if r.hi < g.hi {
				next = append(next, span{r.hi + 1, g.hi})
			}
		}
		gaps = next
	}
	out := make([]part, 0, len(gaps))
	for i := len(gaps) - 1; i >= 0; i-- {
		out = append(out, part{span: gaps[i]})
	}
	if len(out) > 0 {
		out[len(out)-1].stage = pt.stage
	} else if pt.stage {
		// Read completely before: the stage still ends here.
		out = append(out, part{span: span{pt.lo, pt.lo - 1}, stage: true})
	}
	return out
}
