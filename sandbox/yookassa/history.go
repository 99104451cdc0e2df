package yookassa

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/sandbox"
)

// HistoryKey is the Idempotence-Key History records its n-th payment
// under (from 1), in the ledger and in the payment's metadata.idemgate_key.
func HistoryKey(n int) string { return fmt.Sprintf("history-%d", n) }

// History adds a shop's other traffic: n succeeded payments that other
// requests made, their created_at spread evenly from from to to (both
// included, to the millisecond), each carrying its own key (HistoryKey) as
// metadata.idemgate_key and recorded in the ledger under it. They join the
// lists as any payment does. The lists serve objects in creation order, so
// the first of them may not predate the newest payment already held: a
// test seeds the minutes before a call, makes the call on the emulator's
// clock, then seeds the minutes after it.
func (s *Server) History(n int, from, to time.Time) error {
	if n <= 0 || to.Before(from) {
		return errors.New("history: n must be positive and to not before from")
	}
	from, to = from.UTC(), to.UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) > 0 && from.Before(s.order[len(s.order)-1].created) {
		return fmt.Errorf("history: %s predates the newest payment", from.Format(time.RFC3339Nano))
	}
	step := time.Duration(0)
	if n > 1 {
		step = to.Sub(from) / time.Duration(n-1)
	}
	first := s.Ledger().Total()
	for i := range n {
		at := from.Add(step * time.Duration(i)).Truncate(time.Millisecond)
		key := HistoryKey(first + i + 1)
		p := &payment{
			ID: historyID(first + i + 1), Status: "succeeded", Paid: true, Refundable: true, Test: true,
			Amount: amount{Value: "1.00", Currency: "RUB"}, Description: "Order " + key,
			CreatedAt: at.Format("2006-01-02T15:04:05.000Z"), Metadata: map[string]string{"idemgate_key": key},
			created: at, minor: 100,
		}
		s.payments[p.ID] = p
		s.order = append(s.order, p)
		s.Ledger().Record(sandbox.Effect{Key: key, Kind: "payment", ObjectID: p.ID, At: at})
	}
	return nil
}

// historyID is a payment id shaped as YooKassa's (a UUID), numbered: random
// ids for tens of thousands of payments are most of what seeding costs.
func historyID(n int) string {
	return fmt.Sprintf("%08x-000f-5000-9000-%012x", n, n)
}
