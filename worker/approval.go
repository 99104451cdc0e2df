package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/crashpoint"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// Approvals is what the worker needs to hold intents for a person.
type Approvals struct {
	Policy *operation.ApprovalPolicy
	// URL is the approval page of a key ("" when none is served).
	URL func(key string) string
	// NATS is the consumer configuration (the parked stream's name).
	NATS consumer.Config
	// Tokens verifies pre-signed approval tokens (approvals.tokens); nil:
	// a command carrying one is rejected, since nobody here could check it.
	Tokens *approval.Verifier
	// Notify: announce each request on the notify stream
	// (consumer.EnsureNotify must have made it), for the Notifier to POST.
	Notify bool
}

// The outcomes of approval tokens (metric idemgate_approval_tokens_total).
const (
	tokenAccepted = "accepted"
	tokenRefused  = "refused"
)

// gate asks the journal whether j's intent may be claimed. It reports true
// when j goes on to the claim; otherwise it has answered j: the intent
// waits for approval (its command parked, a pending answer with
// await_approval, the delivery acked), conflicts with the intent awaiting
// approval under its key, or the journal failed (the command comes back).
func (w *Worker) gate(j *job) bool {
	ap := w.d.Approvals
	var tok *approval.TokenApproval
	if j.op.ApprovalToken != "" {
		if tok = w.verifyToken(j); tok == nil {
			return false
		}
	}
	if ap == nil {
		return true
	}
	need := ap.Policy.Requires(j.op)
	if crashpoint.Broken(crashpoint.SkipApproval) {
		return true
	}
	if !need.Required {
		return w.ungated(j)
	}
	display, err := approval.Display(j.op)
	if err != nil {
		w.log.Error("approval display", "operation_key", j.op.Key.String(), "error", err.Error())
		w.nak(j, time.Second)
		return false
	}
	requester := j.d.Header(wire.HeaderRequester)
	if requester == "" && j.d.Header(wire.HeaderSource) != "" {
		requester = "source:" + j.d.Header(wire.HeaderSource)
	}
	key := j.op.Key.String()
	req := journal.ApprovalRequest{
		Key: key, OperationType: j.op.Type, RequestHash: j.op.Fingerprint, TargetSystem: j.op.TargetSystem,
		EventID: j.op.EventID, RequestedBy: requester, Display: display, Approvers: need.Approvers, TTL: need.TTL,
	}
	var (
		g journal.Gate
		a journal.Approval
	)
	if tok != nil {
		g, a, err = w.d.Store.ApproveByToken(w.work, journal.TokenDecision{Request: req, Issuer: tok.Issuer, TokenID: tok.ID})
		if errors.Is(err, journal.ErrApprovalRefused) {
			w.m.approvalTokens.WithLabelValues(tokenRefused).Inc()
			w.rejectToken(j, tokenRefusal(err))
			return false
		}
		if err == nil {
			w.m.approvalTokens.WithLabelValues(tokenAccepted).Inc()
			w.log.Info("approved by a pre-signed token", "operation_key", key, "issuer", tok.Issuer, "jti", tok.ID, "gate", string(g))
		}
	} else {
		g, a, err = w.d.Store.RequestApproval(w.work, req)
	}
	if err != nil {
		w.log.Error("approval request failed: the command will be redelivered", "operation_key", key, "error", err.Error())
		w.nak(j, w.cfg.Retry.NextRetry(int(j.deliveries())))
		return false
	}
	switch g {
	case journal.GateProceed:
		return true
	case journal.GateConflict:
		w.m.decided(journal.Conflict)
		w.publishAndAck(j, conflictResult(j.op, journal.AwaitingRecord(a), nil))
		return false
	}
	// Await: park the command (a copy or redelivery parks it again, which
	// replaces the copy), then answer pending and ack.
	if err := consumer.Park(w.work, w.d.JS, key, j.d); err != nil {
		w.log.Error("parking failed: the command will be redelivered", "operation_key", key, "error", err.Error())
		w.nak(j, w.cfg.Retry.NextRetry(int(j.deliveries())))
		return false
	}
	if ap.Notify {
		link := ""
		if ap.URL != nil {
			link = ap.URL(key)
		}
		if err := w.announce(w.work, a, link); err != nil {
			w.log.Error("approval notification not published: the command will be redelivered", "operation_key", key, "error", err.Error())
			w.nak(j, w.cfg.Retry.NextRetry(int(j.deliveries())))
			return false
		}
	}
	w.m.awaitingApproval.Inc()
	w.publishAndAck(j, AwaitingResult(j.op, a, ap.URL))
	return false
}

// verifyToken checks j's approval token; a refused one rejects j
// (fix_input: nothing executed, the same intent may be sent again with a
// good token) and returns nil.
func (w *Worker) verifyToken(j *job) *approval.TokenApproval {
	var v *approval.Verifier
	if w.d.Approvals != nil {
		v = w.d.Approvals.Tokens
	}
	if v == nil {
		w.m.approvalTokens.WithLabelValues(tokenRefused).Inc()
		w.rejectToken(j, "this daemon takes no approval tokens (approvals.tokens.issuers is empty); send the command without one")
		return nil
	}
	t, err := v.Verify(j.op.ApprovalToken, j.op)
	if err != nil {
		w.m.approvalTokens.WithLabelValues(tokenRefused).Inc()
		var te *approval.TokenError
		reason := "refused"
		if errors.As(err, &te) {
			reason = te.Reason
		}
		w.rejectToken(j, reason)
		return nil
	}
	return &t
}

// ungated lets a command its type's policy does not gate (an amount at or
// below the threshold) go on to the claim — unless another request of the
// same intent, one the policy gated, waits for a person or was approved
// and not yet carried out: that request owns the key (it came first), and
// this one is its conflict, answered as the claim answers one. Without
// this, the waiting intent having no journal row yet, a changed request
// under a smaller amount would claim the key and execute. Only types whose
// policy gates by amount are looked up.
func (w *Worker) ungated(j *job) bool {
	if w.d.Approvals.Policy.Rule(j.op.Type).Mode != operation.ApprovalAbove {
		return true
	}
	key := j.op.Key.String()
	a, err := w.d.Store.Approval(w.work, key)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return true
	case err != nil:
		w.log.Error("approval record not read: the command will be redelivered", "operation_key", key, "error", err.Error())
		w.nak(j, w.cfg.Retry.NextRetry(int(j.deliveries())))
		return false
	case a.RequestHash == j.op.Fingerprint:
		return true
	}
	rec, err := w.d.Store.Get(w.work, key)
	if err != nil {
		w.log.Error("journal row not read: the command will be redelivered", "operation_key", key, "error", err.Error())
		w.nak(j, w.cfg.Retry.NextRetry(int(j.deliveries())))
		return false
	}
	if rec.RequestHash == j.op.Fingerprint {
		return true // the key's row is this request's: the claim replays it
	}
	w.m.decided(journal.Conflict)
	w.publishAndAck(j, conflictResult(j.op, rec, nil))
	return false
}

// tokenRefusal is the safe reason of a journal's refusal of a token.
func tokenRefusal(err error) string {
	switch {
	case errors.Is(err, journal.ErrTokenReused):
		return "its jti already approved another intent: one token approves one intent"
	case errors.Is(err, journal.ErrSelfApproval):
		return "its issuer submitted the command; the requester cannot approve their own command"
	}
	return "the journal refused it"
}

// rejectToken rejects j for its approval token: nothing executed, nothing
// of the token in the result or the log.
func (w *Worker) rejectToken(j *job, reason string) {
	w.reject(j, &operation.DecodeError{Code: operation.CodeInvalidField, Field: "approval_token", Msg: reason,
		Key: j.op.Key.String(), EventID: j.op.EventID, Operation: j.op.Type})
}

// AwaitingResult is the pending answer of an intent that waits for a
// person's approval.
func AwaitingResult(op operation.Operation, a journal.Approval, url func(string) string) operation.Result {
	wait := &operation.ApprovalWait{ExpiresAt: a.ExpiresAt.UTC(), Approvers: a.Approvers, Approved: a.Approved()}
	if url != nil {
		wait.URL = url(a.Key)
	}
	r := answer.Thresholds{}.Of(answer.StateAwaitingApproval, answer.Facts{Operation: op.Type, TargetSystem: op.TargetSystem}).Envelope(op.EventID)
	r.OperationKey, r.Approval = a.Key, wait
	return r
}

// ApprovalSweeperConfig tunes the approval sweeper.
type ApprovalSweeperConfig struct {
	// Interval between sweeps. Default 1s.
	Interval time.Duration
	// Batch bounds the records one sweep handles. Default 100.
	Batch int
}

// ApprovalSweeper carries decided approvals out and ends overdue ones:
// each sweep expires the pending records past their wait limit
// (failed_final approval_expired) and hands every decided record's parked
// command back to its subject (consumer.Release), where the worker claims
// it as usual: approved, it executes once; denied or expired, its
// failed_final outcome is replayed and published. Every replica may run
// one: the journal decides each record once, and a release published twice
// is one message (its Nats-Msg-Id) and one claim.
type ApprovalSweeper struct {
	cfg   ApprovalSweeperConfig
	store journal.Store
	js    consumer.JetStream
	ncfg  consumer.Config
	log   *slog.Logger
	m     *Metrics
	nudge chan struct{}
	startstop.BaseStartStop
}

// NewApprovalSweeper builds a sweeper.
func NewApprovalSweeper(cfg ApprovalSweeperConfig, store journal.Store, js consumer.JetStream, ncfg consumer.Config, log *slog.Logger, m *Metrics) *ApprovalSweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &ApprovalSweeper{cfg: cfg, store: store, js: js, ncfg: ncfg, log: log, m: m, nudge: make(chan struct{}, 1)}
}

// Nudge asks for a sweep now (a decision was just recorded).
func (s *ApprovalSweeper) Nudge() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// Start runs sweeps until Stop.
func (s *ApprovalSweeper) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := s.StartInit(ctx)
	if !shouldStart {
		return fmt.Errorf("approval sweeper: %w", startstop.ErrAlreadyStarted)
	}
	go func() {
		started()
		defer stopped()
		t := time.NewTicker(s.cfg.Interval)
		defer t.Stop()
		for {
			if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("approval sweep", "error", err.Error())
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-s.nudge:
			}
		}
	}()
	return nil
}

// Sweep runs one sweep.
func (s *ApprovalSweeper) Sweep(ctx context.Context) error {
	expired, err := s.store.ExpireApprovals(ctx, s.cfg.Batch)
	for _, k := range expired {
		s.m.approvalDecisions.WithLabelValues(string(journal.ApprovalExpired)).Inc()
		s.log.Info("approval expired: the intent ends failed_final, nothing executed", "operation_key", k)
	}
	if err != nil {
		return err
	}
	decided, err := s.store.ApprovalsToRelease(ctx, s.cfg.Batch)
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range decided {
		_, err := consumer.Release(ctx, s.js, s.ncfg, a.Key, wire.ReleaseMsgID(a.Key, string(a.State)))
		switch {
		case errors.Is(err, consumer.ErrNotParked):
			// Aged out or never parked: the journal holds the decision, the
			// agent's next call or poll reads it.
			s.log.Warn("no parked command to release; the decision stands in the journal", "operation_key", a.Key, "state", string(a.State))
		case err != nil:
			errs = append(errs, err)
			continue
		}
		if a.State != journal.ApprovalExpired {
			s.m.approvalDecisions.WithLabelValues(string(a.State)).Inc()
		}
		if !a.DecidedAt.IsZero() && !a.RequestedAt.IsZero() {
			s.m.approvalWait.Observe(a.DecidedAt.Sub(a.RequestedAt).Seconds())
		}
		if err := s.store.MarkReleased(ctx, a.Key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops sweeping; safe twice.
func (s *ApprovalSweeper) Stop() { s.BaseStartStop.Stop() }
