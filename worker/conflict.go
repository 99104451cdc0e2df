package worker

import (
	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
)

// conflictResult answers a command whose key rec holds with another
// fingerprint: nothing is executed for it, fields name what differs from
// the first request, and the first request's outcome (status, object) is
// carried and told, so that a conflict on money is never read as "nothing
// was charged".
func conflictResult(op operation.Operation, rec journal.Record, fields []string) operation.Result {
	ex := existingOf(rec)
	return operation.Result{
		OperationKey: rec.Key, EventID: op.EventID, Operation: op.Type,
		Status: operation.ResultConflict, TargetSystem: op.TargetSystem,
		ErrorCode: adapters.CodeKeyPayloadMismatch, Reason: operation.ConflictReason(op.TargetSystem, fields, ex),
		Attempts: rec.AttemptCount, ConflictFields: fields, Existing: ex,
	}
}

// existingOf is the outcome of the journal row's request.
func existingOf(rec journal.Record) *operation.Existing {
	return &operation.Existing{Status: resultStatus(rec.Status), TargetObjectID: rec.TargetObjectID, ErrorCode: rec.ErrorCode}
}
