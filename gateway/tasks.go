// Tasks: an operation that is not final, followed by its key. A task is
// recorded in a JetStream key-value bucket when it is handed out, so that
// it is readable before the daemon has claimed its command and after any
// restart; its state is then the journal row's.

package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// TasksBucket is the JetStream key-value bucket of handed-out tasks.
const TasksBucket = "IDEMGATE_TASKS"

// Task statuses, the Tasks extension's words.
const (
	// TaskWorking: the operation is queued, being executed or looked up, or
	// waiting for someone (the message says who and what).
	TaskWorking = "working"
	// TaskCompleted: the operation is final; Answer is the call's answer.
	TaskCompleted = "completed"
	// TaskCancelled: cancelled before anything was sent.
	TaskCancelled = "cancelled"
)

// CodeCancelled is the error code of an operation cancelled before it was
// sent (CancelTask).
const CodeCancelled = answer.CodeCancelled

// ErrTaskNotFound: no task, and no operation, has that id.
var ErrTaskNotFound = errors.New("gateway: no such task")

// Task is an operation followed by its key.
type Task struct {
	// ID is the operation key.
	ID string
	// Status is working, completed or cancelled.
	Status string
	// Message says where the operation stands, in the answer's words.
	Message string
	// Answer is, once completed or cancelled, what the call answers: the
	// same answer the tool gives when it waits for the outcome.
	Answer Answer
	// CreatedAt is when the task was handed out (the operation's first
	// claim for an operation never handed out as a task); UpdatedAt when
	// its journal row last changed.
	CreatedAt, UpdatedAt time.Time
	// TTL is how long the task stays readable at least; PollAfter how long
	// to wait between reads.
	TTL, PollAfter time.Duration
	// Approval is set while the operation waits for a person's approval
	// (working): the page where an approver decides, the expiry, the
	// approvers needed and those so far.
	Approval *operation.ApprovalWait
	// Answered names the input requests of this task the client has
	// answered (AnswerTaskInput); a face asks each at most once.
	Answered []string
}

// Final reports whether the task's status cannot change any more.
func (t Task) Final() bool { return t.Status != TaskWorking }

// taskRecord is a handed-out task as the bucket holds it: what a cancel
// needs to claim the key as the command would (never a payload value).
type taskRecord struct {
	Key          string    `json:"key"`
	Operation    string    `json:"operation"`
	TargetSystem string    `json:"target_system"`
	RequestHash  string    `json:"request_hash"`
	FieldDigests string    `json:"field_digests,omitempty"`
	EventID      string    `json:"event_id"`
	ApprovalID   string    `json:"approval_id,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// Answered names the task's input requests the client has answered
	// (tasks/update): a request's name stands for one request over the
	// task's life, so an answered one is never asked again.
	Answered []string `json:"answered,omitempty"`
}

// bucketKey is a key's name in the bucket: the key alphabet has ':' and
// '~', which bucket keys do not.
func bucketKey(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// tasks returns the tasks bucket, made on first use when create is set;
// nil, nil when it does not exist and create is not set.
func (g *Gateway) tasks(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	g.tasksMu.Lock()
	defer g.tasksMu.Unlock()
	if g.tasksKV != nil {
		return g.tasksKV, nil
	}
	js, err := jetstream.New(g.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	kv, err := js.KeyValue(ctx, TasksBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: TasksBucket, History: 1, TTL: g.cfg.TaskTTL,
			Replicas: max(1, g.cfg.TaskReplicas), Description: "idemgate: tasks handed out by the MCP face, by operation key"})
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tasks bucket: %w", err)
	}
	g.tasksKV = kv
	return kv, nil
}

// StartTask records req's operation as a task and returns it as it stands.
// Call it after Submit answered pending: the command is in JetStream, and
// once StartTask returns the task is readable by Task on any gateway of
// the deployment, before and after the daemon claims it and across
// restarts. A second call for the same key keeps the first record.
func (g *Gateway) StartTask(ctx context.Context, req Request) (Task, error) {
	cmd := operation.Command{EventID: req.IntentID, Operation: req.Operation, IntentID: req.IntentID,
		ApprovalID: req.ApprovalID, Payload: req.Payload}
	var (
		op  operation.Operation
		err error
	)
	if g.knownProcess(req.Operation) {
		// A process: decoded by its declaration; its task follows the
		// process record.
		op, err = g.procs.DecodeCommand(cmd)
		op.TargetSystem = process.TargetSystem
	} else {
		op, err = g.dec.DecodeCommand(cmd)
	}
	if err != nil {
		return Task{}, fmt.Errorf("task: %w", err)
	}
	kv, err := g.tasks(ctx, true)
	if err != nil {
		return Task{}, err
	}
	key := op.Key.String()
	b, err := json.Marshal(taskRecord{Key: key, Operation: op.Type, TargetSystem: op.TargetSystem, RequestHash: op.Fingerprint,
		FieldDigests: op.FieldDigests(), EventID: req.IntentID, ApprovalID: req.ApprovalID, CreatedAt: g.now().UTC()})
	if err != nil {
		return Task{}, err
	}
	if _, err := kv.Create(ctx, bucketKey(key), b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return Task{}, fmt.Errorf("record task %s: %w", key, err)
	}
	return g.Task(ctx, key)
}

// ErrTaskNotHanded: the task was never handed out by a face, so nothing
// can be recorded about it (AnswerTaskInput).
var ErrTaskNotHanded = errors.New("gateway: the task was not handed out by this deployment")

// AnswerTaskInput records that the client answered the task's input
// request named name, on the task's record in the bucket (so every
// gateway of the deployment sees it, across restarts). Recording it again
// changes nothing. ErrTaskNotHanded for an operation never handed out as
// a task.
func (g *Gateway) AnswerTaskInput(ctx context.Context, id, name string) error {
	kv, err := g.tasks(ctx, false)
	if err != nil {
		return err
	}
	if kv == nil {
		return ErrTaskNotHanded
	}
	// Compare-and-set on the record's revision: two gateways recording
	// different answers at once must not lose one.
	for range 5 {
		e, err := kv.Get(ctx, bucketKey(id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return ErrTaskNotHanded
		}
		if err != nil {
			return fmt.Errorf("read task %s: %w", id, err)
		}
		var rec taskRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return fmt.Errorf("read task %s: %w", id, err)
		}
		if slices.Contains(rec.Answered, name) {
			return nil
		}
		rec.Answered = append(rec.Answered, name)
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		_, err = kv.Update(ctx, bucketKey(id), b, e.Revision())
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // changed under us: read it again
		}
		if err != nil {
			return fmt.Errorf("record the answer of task %s: %w", id, err)
		}
		return nil
	}
	return fmt.Errorf("record the answer of task %s: its record kept changing", id)
}

// record reads a task's record; ok is false when there is none.
func (g *Gateway) record(ctx context.Context, key string) (rec taskRecord, ok bool, err error) {
	kv, err := g.tasks(ctx, false)
	if err != nil || kv == nil {
		return rec, false, err
	}
	e, err := kv.Get(ctx, bucketKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("read task %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, false, fmt.Errorf("read task %s: %w", key, err)
	}
	return rec, true, nil
}

// Task returns the task with that id (an operation key) as it stands now:
// working while the operation is not final, completed with the call's
// answer once it is (a conflict with another request of the same intent
// included), cancelled when CancelTask ended it. ErrTaskNotFound when
// neither a task record nor the journal knows the key.
func (g *Gateway) Task(ctx context.Context, id string) (Task, error) {
	k, err := operation.ParseKey(id)
	if err != nil {
		return Task{}, ErrTaskNotFound
	}
	trec, handed, err := g.record(ctx, id)
	if err != nil {
		return Task{}, err
	}
	t := Task{ID: id, TTL: g.cfg.TaskTTL, PollAfter: g.cfg.PollAfter, CreatedAt: trec.CreatedAt, UpdatedAt: trec.CreatedAt,
		Answered: trec.Answered}
	if _, ok := process.IsProcess(k.Operation); ok {
		return g.processTask(ctx, t, trec, handed)
	}
	rec, err := g.store.Get(ctx, id)
	if errors.Is(err, journal.ErrNotFound) {
		if !handed {
			return Task{}, ErrTaskNotFound
		}
		t.Status, t.Message = TaskWorking, g.queued(id, trec.Operation, trec.TargetSystem).Reason
		return t, nil
	}
	if err != nil {
		return Task{}, fmt.Errorf("read operation %s: %w", id, err)
	}
	if !handed {
		t.CreatedAt = rec.CreatedAt
	}
	t.UpdatedAt = rec.UpdatedAt
	switch {
	case handed && rec.RequestHash != trec.RequestHash:
		// Another request of the intent was claimed first: this one is
		// answered conflict, and nothing runs for it.
		stored, err := g.store.FieldDigests(ctx, id)
		if err != nil {
			g.log.Warn("gateway: field digests not read", "operation_key", id, "error", err.Error())
		}
		t.Status, t.Answer = TaskCompleted, g.rules.Conflict(rec, operation.ConflictFields(stored, trec.FieldDigests))
	case rec.Status == journal.StatusFailedFinal && rec.ErrorCode == CodeCancelled:
		t.Status, t.Answer = TaskCancelled, g.rules.FromResult(resultOf(rec))
	case rec.Status.Terminal():
		t.Status, t.Answer = TaskCompleted, g.rules.FromResult(resultOf(rec))
	default:
		t.Status, t.Message = TaskWorking, g.rules.FromRecord(rec, g.now()).Reason
		if rec.Status == journal.StatusAwaitingApproval {
			t.Approval = g.approvalWait(ctx, id)
		}
	}
	if t.Final() {
		t.Message = t.Answer.Reason
	}
	if t.UpdatedAt.Before(t.CreatedAt) {
		t.UpdatedAt = t.CreatedAt // a row last changed before the task was handed out
	}
	return t, nil
}

// Cancellation is what CancelTask did.
type Cancellation struct {
	// Cancelled: the operation ends cancelled, nothing was or will be sent.
	Cancelled bool
	// EffectPossible: the operation was not cancelled because it may
	// already have reached the target (claimed, executed, being looked
	// up): its outcome comes as it would have.
	EffectPossible bool
	// Reason says which, in one sentence.
	Reason string
}

// cancelOwner is the owner name of a cancelling claim in the trail.
const cancelOwner = "gateway-cancel"

// CancelTask cancels a task's operation if nothing of it has executed: its
// command is queued and no worker has claimed it (the cancel claims the key
// itself, through the journal, so a worker that comes later replays the
// cancellation and calls nothing). An operation already claimed is not
// cancelled — it may have reached the target — and one already final
// stays as it is; Reason says so. ErrTaskNotFound for an unknown id.
func (g *Gateway) CancelTask(ctx context.Context, id string) (Cancellation, error) {
	t, err := g.Task(ctx, id)
	if err != nil {
		return Cancellation{}, err
	}
	switch t.Status {
	case TaskCancelled:
		return Cancellation{Cancelled: true, Reason: "Already cancelled: nothing was sent for this intent."}, nil
	case TaskCompleted:
		return Cancellation{EffectPossible: t.Answer.Status == StatusSucceeded,
			Reason: fmt.Sprintf("Not cancelled: the operation is already final (%s); %s", t.Answer.Status, t.Answer.Reason)}, nil
	}
	if k, err := operation.ParseKey(id); err == nil {
		if _, ok := process.IsProcess(k.Operation); ok {
			// A process is undone by its compensations, not stopped halfway:
			// its steps may already have made their effects.
			return Cancellation{EffectPossible: true, Reason: "Not cancelled: a process is not cancelled once handed to the daemon — " +
				"its steps may already have made their effects, and a step that fails for good compensates those before it; " +
				"its outcome comes as it would have — keep reading the task."}, nil
		}
	}
	trec, handed, err := g.record(ctx, id)
	if err != nil {
		return Cancellation{}, err
	}
	if _, err := g.store.Get(ctx, id); !errors.Is(err, journal.ErrNotFound) || !handed {
		if err != nil && !errors.Is(err, journal.ErrNotFound) {
			return Cancellation{}, fmt.Errorf("read operation %s: %w", id, err)
		}
		return notCancelled(), nil
	}
	if g.cancels == nil {
		return Cancellation{Reason: "Not cancelled: this gateway has no journal writer to cancel with; the operation goes on."}, nil
	}
	cancelled, _, err := journal.CancelUnclaimed(ctx, g.cancels, journal.ClaimRequest{Key: id, OperationType: trec.Operation,
		RequestHash: trec.RequestHash, TargetSystem: trec.TargetSystem, EventID: trec.EventID, ApprovalID: trec.ApprovalID,
		FieldDigests: trec.FieldDigests, Owner: cancelOwner, LeaseTTL: g.cfg.PublishTimeout},
		CodeCancelled, "cancelled by the agent before any worker claimed it (tasks/cancel); nothing was sent")
	if err != nil {
		return Cancellation{}, err
	}
	if !cancelled {
		return notCancelled(), nil
	}
	return Cancellation{Cancelled: true, Reason: "Cancelled: no worker had claimed the command, so nothing was sent and nothing will be; " +
		"the command that reaches the daemon is answered with the cancellation."}, nil
}

func notCancelled() Cancellation {
	return Cancellation{EffectPossible: true, Reason: "Not cancelled: a worker has already claimed this operation, so its effect may already exist in the target; " +
		"its outcome comes as it would have — keep reading the task."}
}

// processTask is Task for a process key: working while the process runs
// (or is queued), completed with the process's answer once it is at rest,
// completed with a conflict when the key holds another input.
func (g *Gateway) processTask(ctx context.Context, t Task, trec taskRecord, handed bool) (Task, error) {
	pj, ok := g.store.(ProcessJournal)
	if !ok {
		return Task{}, errors.New("gateway: this journal keeps no processes")
	}
	rec, err := pj.GetProcess(ctx, t.ID)
	if errors.Is(err, journal.ErrNotFound) {
		if !handed {
			return Task{}, ErrTaskNotFound
		}
		t.Status, t.Message = TaskWorking, g.queued(t.ID, trec.Operation, process.TargetSystem).Reason
		return t, nil
	}
	if err != nil {
		return Task{}, fmt.Errorf("read process %s: %w", t.ID, err)
	}
	if !handed {
		t.CreatedAt = rec.CreatedAt
	}
	t.UpdatedAt = rec.UpdatedAt
	if t.UpdatedAt.Before(t.CreatedAt) {
		t.UpdatedAt = t.CreatedAt
	}
	if handed && rec.RequestHash != trec.RequestHash {
		a := g.processConflict(trec.Operation, rec)
		t.Status, t.Answer, t.Message = TaskCompleted, a, a.Reason
		return t, nil
	}
	a := g.lookupProcess(ctx, t.ID)
	switch a.Status {
	case StatusSucceeded, StatusFailedFinal:
		t.Status, t.Answer, t.Message = TaskCompleted, a, a.Reason
	case StatusUnavailable:
		return Task{}, fmt.Errorf("read process %s: %s", t.ID, a.Reason)
	default:
		t.Status, t.Message = TaskWorking, a.Reason
	}
	return t, nil
}
