package gateway

import (
	"sync"
	"time"
)

// recentTTL is how long a published key is remembered as queued: past the
// stream's usual duplicate window, a command still unclaimed is rare, and
// "not found" (safe to send again) is then the honest answer.
const recentTTL = 10 * time.Minute

// recentMax bounds the memory: past it the oldest keys are forgotten.
const recentMax = 100_000

// recent is a bounded set of keys published lately, oldest first.
type recent struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string // keys in the order first added; order[head:] is live
	head  int
}

func (r *recent) add(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	if _, ok := r.at[key]; !ok {
		r.order = append(r.order, key)
	}
	r.at[key] = now
	for r.head < len(r.order) {
		k := r.order[r.head]
		if k == key || (now.Sub(r.at[k]) < recentTTL && len(r.order)-r.head <= recentMax) {
			break
		}
		delete(r.at, k)
		r.order[r.head] = ""
		r.head++
	}
	if r.head > len(r.order)/2 {
		r.order = append(r.order[:0], r.order[r.head:]...)
		r.head = 0
	}
}

func (r *recent) has(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.at[key]
	return ok && now.Sub(t) < recentTTL
}
