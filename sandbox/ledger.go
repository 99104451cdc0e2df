package sandbox

import (
	"sync"
	"time"
)

// Effect is one real effect in an emulated target: an object it created.
type Effect struct {
	// Seq numbers effects from 1 in creation order.
	Seq int `json:"seq"`
	// Key is the operation key the client sent with the request that created
	// the object (header, external-ID field, custom field…), even when the
	// target or a connector ignored it. Empty when the client sent none.
	Key string `json:"key"`
	// Kind is the object type, e.g. "invoice", "deal", "task", "payment".
	Kind string `json:"kind"`
	// ObjectID is the target's ID of the object.
	ObjectID string `json:"object_id"`
	// KeyIgnored is set when the object was created while the ignore-key
	// connector fault was active, so the target did not store the key.
	KeyIgnored bool `json:"key_ignored,omitempty"`
	// At is the emulator clock's time of creation.
	At time.Time `json:"at"`
}

// Ledger records real effects per key. It is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	effects []Effect
	byKey   map[string]int
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{byKey: make(map[string]int)}
}

// Record appends e (its Seq is assigned) and returns the recorded effect.
func (l *Ledger) Record(e Effect) Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = len(l.effects) + 1
	l.effects = append(l.effects, e)
	l.byKey[e.Key]++
	return e
}

// Count returns the number of effects recorded for key.
func (l *Ledger) Count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byKey[key]
}

// Total returns the number of effects recorded.
func (l *Ledger) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.effects)
}

// Effects returns a copy of all effects in creation order.
func (l *Ledger) Effects() []Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Effect(nil), l.effects...)
}

// ByKey returns a copy of the per-key counts.
func (l *Ledger) ByKey() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]int, len(l.byKey))
	for k, v := range l.byKey {
		m[k] = v
	}
	return m
}

// Reset forgets all effects.
func (l *Ledger) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.effects = nil
	l.byKey = make(map[string]int)
}
