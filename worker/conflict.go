package worker

import (
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// conflictResult answers a command whose key rec holds with another
// fingerprint: nothing is executed for it, fields name what differs from
// the first request, and the first request's outcome (status, object) is
// carried and told, so that a conflict on money is never read as "nothing
// was charged".
func conflictResult(op operation.Operation, rec journal.Record, fields []string) operation.Result {
	r := answer.Thresholds{}.Conflict(rec, fields).Envelope(op.EventID)
	r.Operation, r.TargetSystem = op.Type, op.TargetSystem
	return r
}
