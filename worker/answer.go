package worker

import (
	"errors"
	"time"

	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// Answering a command: the result published and the command acked, a
// pending answer and a return later, a rejection.

// completeAndPublish records a final outcome in the next group commit, then
// publishes and acks. It returns at once: the group's flush carries on.
func (w *Worker) completeAndPublish(j *job, c journal.Completion, replayed bool) {
	c.Token = w.fencingToken(c.Key, c.Token)
	w.commit.Submit(w.work, c, func(err error) {
		if err != nil {
			w.completionFailed(j, err)
			return
		}
		rec := j.claim.Record
		rec.Status = c.Status
		rec.TargetObjectID = c.TargetObjectID
		rec.Result = c.Result
		rec.ErrorCode = c.ErrorCode
		rec.AttemptCount = j.claim.Attempt
		w.publishAndAck(j, w.resultFromRecord(j, rec, replayed))
	})
}

// fencingToken is the token a completion of key carries: token, except in
// a soak build told to break fencing (crashpoint.NoFencing).
func (w *Worker) fencingToken(key string, token int64) int64 {
	return crashpoint.Token(token, func() (int64, error) {
		rec, err := w.d.Store.Get(w.work, key)
		return rec.LeaseToken, err
	})
}

// completionFailed handles a completion the journal refused or could not take.
// A stale token means another owner has the operation; anything else leaves
// the outcome to the lease's expiry and reconciliation. Either way the
// command is redelivered, never acked unpublished.
func (w *Worker) completionFailed(j *job, err error) {
	log := w.log.With("operation_key", j.op.Key.String(), "lease_token", j.claim.Token, "error", err.Error())
	if errors.Is(err, journal.ErrStaleToken) {
		// Fencing working as designed: another owner (a take-over, an
		// operator's decision) has the operation and publishes its outcome.
		w.m.fenced.WithLabelValues("worker").Inc()
		log.Info("completion fenced off: another owner holds the operation")
	} else {
		log.Error("completion failed: the lease will expire and be reconciled")
	}
	w.nak(j, w.cfg.LeaseTTL)
}

// resultFromRecord is the result of j's command for the journal row rec:
// its facts with the next_action and reason every face gives for it.
func (w *Worker) resultFromRecord(j *job, rec journal.Record, replayed bool) operation.Result {
	r := w.d.Answers.ResultFor(rec, time.Now())
	r.EventID, r.Operation, r.Replayed = j.op.EventID, j.op.Type, replayed
	return r
}

// publishAndAck hands the result back to be published; the command is
// acked once JetStream has acknowledged it (consumer.Delivery.Answer).
func (w *Worker) publishAndAck(j *job, r operation.Result) { j.d.Answer(r) }

// publishPendingAndNak tells the agent the outcome is being settled, as
// the journal row rec says, and brings the command back after delay.
func (w *Worker) publishPendingAndNak(j *job, delay time.Duration, rec journal.Record) {
	j.d.AnswerThenNak(w.pendingResult(j, rec), delay)
}

// pendingResult says the outcome of j's operation is being settled, in
// the words of its journal row rec (a row still pending: a final one is
// answered by resultFromRecord).
func (w *Worker) pendingResult(j *job, rec journal.Record) operation.Result {
	if rec.Status.Terminal() || rec.Status == "" {
		rec.Status = journal.StatusStarted
	}
	r := w.resultFromRecord(j, rec, false)
	r.TargetObjectID, r.Result = "", nil
	return r
}

// nak returns the command to JetStream after delay and releases its slot.
// On its last delivery the command is left to AckWait: JetStream then stops
// redelivering, and the journal row stays for the reconciler.
func (w *Worker) nak(j *job, delay time.Duration) {
	j.d.SetKey(j.op.Key.String())
	j.d.Nak(delay)
}

// reject terminates an undecodable command after publishing its rejected
// result: on idemgate.res.<operation> when a key could be derived, else on
// wire.RejectedSubject under the command's stream sequence, and to the
// command's reply subject either way. Every command gets an answer. Nothing
// in the result or the log quotes the command: the reason names fields only
// (operation.DecodeError), and event_id and the subject appear only when they
// passed the key rules. The command is terminated only once the result is
// published; a failed publish brings it back.
func (w *Worker) reject(j *job, err error) {
	w.m.rejected.Inc()
	var de *operation.DecodeError
	if !errors.As(err, &de) {
		de = &operation.DecodeError{Code: operation.CodeNotJSON, Msg: "undecodable command"}
	}
	r := de.RejectedResult()
	r.CommandSeq = j.d.StreamSeq()
	a := w.d.Answers.Rejected(r.OperationKey, r.Operation, r.ErrorCode, r.Reason)
	r.NextAction, r.Reason = string(a.NextAction), a.Reason
	if r.EventID == "" && (de.Code == operation.CodeNotJSON || de.Code == operation.CodeTooLarge) {
		// The envelope was not read; its Nats-Msg-Id is the event id by
		// contract, and is used when it is a safe one.
		if id := j.d.Header(wire.HeaderMsgID); operation.ValidateID("event_id", id) == nil {
			r.EventID = id
		}
	}
	j.traceRejected(string(de.Code))
	log := w.log.With("reason", string(de.Code), "field", de.Field, "detail", de.Msg,
		"operation_key", r.OperationKey, "event_id", r.EventID, "stream_seq", r.CommandSeq)
	if de.Operation != "" && j.d.Subject() == wire.CommandSubject(de.Operation) {
		log = log.With("subject", j.d.Subject()) // any other subject may hold anything
	}
	log.Warn("command rejected")
	j.d.Reject(r, string(de.Code))
}
