package adapters

import (
	"context"
	"sync"
)

// KeyLocks serialises work per key inside one process: the single-flight
// that adapters for targets without uniqueness (Bitrix24, amoCRM, 1C over
// plain OData) hold around "search, then create, then re-search".
//
// It does not cover several replicas or restarts: two daemons may still both
// search, find nothing and create. Across replicas the journal's lease (one
// owner per operation key, fenced by lease_token) is what keeps a second
// Execute of the same key from starting; KeyLocks only closes the window
// inside one process (a reconciler and a worker racing on one key, or a
// lease taken over while the old owner is still in its call).
type KeyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

// Lock waits until key is free or ctx ends and returns the unlock function.
func (k *KeyLocks) Lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = make(map[string]*keyLock)
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.ch
			k.release(key, l)
		})
	}, nil
}

func (k *KeyLocks) release(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(k.locks, key)
	}
}
