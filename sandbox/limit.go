package sandbox

import (
	"sync"
	"time"
)

// LeakyBucket is the rate limiter emulators use (Bitrix24's per-portal
// bucket, amoCRM's 7 requests per second). Each request adds one unit; the
// bucket leaks LeakPerSec units per second; a request that would overflow
// Capacity is refused. A zero Capacity disables the limit.
type LeakyBucket struct {
	Capacity   float64
	LeakPerSec float64
	clock      func() time.Time

	mu    sync.Mutex
	level float64
	last  time.Time
}

// NewLeakyBucket returns a bucket on clock (time.Now when nil).
func NewLeakyBucket(capacity, leakPerSec float64, clock func() time.Time) *LeakyBucket {
	if clock == nil {
		clock = time.Now
	}
	return &LeakyBucket{Capacity: capacity, LeakPerSec: leakPerSec, clock: clock}
}

// Allow adds one request. When refused it returns the wait until one unit
// has leaked.
func (b *LeakyBucket) Allow() (bool, time.Duration) {
	if b == nil || b.Capacity <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	if !b.last.IsZero() && b.LeakPerSec > 0 {
		b.level -= now.Sub(b.last).Seconds() * b.LeakPerSec
		if b.level < 0 {
			b.level = 0
		}
	}
	b.last = now
	if b.level+1 > b.Capacity {
		if b.LeakPerSec <= 0 {
			return false, time.Second
		}
		wait := time.Duration((b.level + 1 - b.Capacity) / b.LeakPerSec * float64(time.Second))
		return false, wait
	}
	b.level++
	return true, 0
}

// Reset empties the bucket.
func (b *LeakyBucket) Reset() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.level, b.last = 0, time.Time{}
}
