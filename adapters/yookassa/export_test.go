package yookassa

// WaitingLookups is how many lookups wait for the next read of a list (not
// the one running): the tests of shared reads wait for it.
func (a *Adapter) WaitingLookups() int {
	a.scans.mu.Lock()
	defer a.scans.mu.Unlock()
	n := 0
	for _, l := range a.scans.lanes {
		n += len(l.pending)
	}
	return n
}

// ReadingLists is how many lists a lane is reading or about to read: zero
// once every read has ended.
func (a *Adapter) ReadingLists() int {
	a.scans.mu.Lock()
	defer a.scans.mu.Unlock()
	return len(a.scans.lanes)
}
