package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/approval"
	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/worker"
)

// conflictScan is how many of the newest results the console's conflicts
// page reads: conflicts are in JetStream only, never in the journal.
const conflictScan = 2000

// newConsole builds the operator console on the daemon's journal, JetStream
// and metrics. Its resolve is worker.Resolve, as `idemgate resolve`'s, here
// with the daemon's JetStream so that the decision is published at once.
func newConsole(c Config, routes map[string]adapters.Adapter, store journalStore, js jetstream.JetStream, metrics *worker.Metrics, log *slog.Logger) (*console.Console, error) {
	if host, _, err := net.SplitHostPort(c.Admin.Addr); err == nil {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			log.Warn("the operator console is served beyond loopback: put a reverse proxy with TLS in front of the admin listener", "addr", c.Admin.Addr)
		}
	}
	types, err := c.registry()
	if err != nil {
		return nil, err
	}
	var approvals *approval.Service
	if c.Approvals.Enabled {
		policy, err := c.Approvals.policy(types)
		if err != nil {
			return nil, err
		}
		approvals = &approval.Service{Store: store, Policy: policy, Approvers: c.Approvals.Approvers}
	}
	return console.New(c.Console, console.Deps{
		Approvals: approvals,
		Store:     store, ObjectURL: objectLinks(routes), Env: c.Env, Types: types.Names(), Answers: c.Reconciler.Thresholds(), Log: log,
		Process: func(ctx context.Context, key string) (console.ProcessPage, error) {
			tr, err := traceProcess(ctx, store, types, key)
			if err != nil {
				return console.ProcessPage{}, err
			}
			return processPage(tr, c.Reconciler.Thresholds()), nil
		},
		ResolveProcess: func(ctx context.Context, r journal.ProcessResolution) (journal.ProcessRecord, error) {
			rec, _, err := settleProcess(ctx, store, types, js, r)
			if errors.Is(err, errNotPublished) {
				return rec, fmt.Errorf("%w: %w", console.ErrNotPublished, err)
			}
			return rec, err
		},
		Resolve: func(ctx context.Context, r journal.Resolution) (journal.Record, error) {
			rec, err := worker.Resolve(ctx, worker.Deps{Store: store, JS: js, Log: log, Metrics: metrics, Answers: c.Reconciler.Thresholds()}, r)
			if errors.Is(err, worker.ErrResultNotPublished) {
				return rec, fmt.Errorf("%w: %w", console.ErrNotPublished, err)
			}
			return rec, err
		},
		Backlog: func(ctx context.Context) (console.Backlog, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			cons, err := js.Consumer(ctx, c.NATS.CommandsStream, c.NATS.Durable)
			if err != nil {
				return console.Backlog{}, err
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return console.Backlog{}, err
			}
			return console.Backlog{Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered}, nil
		},
		Conflicts: func(ctx context.Context) (console.ConflictScan, error) {
			return scanConflicts(ctx, js, c.NATS.ResultsStream, conflictScan)
		},
		Counters: replicaCounters(metrics),
		Looker:   adapterLooker{routes: routes, store: store, callTimeout: c.Worker.WithDefaults().CallTimeout},
	})
}

// replicaCounters reads this replica's replays and conflicts from its claim
// decisions (claim_decisions_total).
func replicaCounters(m *worker.Metrics) func() console.ReplicaCounters {
	return func() console.ReplicaCounters {
		d := m.DecisionCounts()
		return console.ReplicaCounters{ReplaysSucceeded: int64(d[journal.ReplaySucceeded]), ReplaysFailed: int64(d[journal.ReplayFailed]),
			Conflicts: int64(d[journal.Conflict])}
	}
}

// adapterLooker is the console's console.Looker: it asks the adapter an
// operation's type is routed to, as a reconcile round does
// (worker.LookUp), and writes nothing.
type adapterLooker struct {
	routes      map[string]adapters.Adapter
	store       journal.Store
	callTimeout time.Duration
}

func (l adapterLooker) LookUp(ctx context.Context, rec journal.Record) (console.Lookup, error) {
	a, ok := l.routes[rec.OperationType]
	if !ok {
		return console.Lookup{}, fmt.Errorf("%w: %s is not routed here", console.ErrNoLookup, rec.OperationType)
	}
	r, err := worker.LookUp(ctx, l.store, a, rec, l.callTimeout)
	if err != nil {
		return console.Lookup{}, err
	}
	return console.Lookup{Status: console.LookupStatus(r.Status), ObjectID: r.Outcome.ObjectID, Duplicates: r.Outcome.Duplicates,
		Final: r.Final, Code: r.Code, Note: r.Note}, nil
}

// objectLinks finds an operation's object page through the adapter its
// type is routed to, when that adapter knows one (adapters.ObjectLinker).
func objectLinks(routes map[string]adapters.Adapter) func(journal.Record) string {
	return func(rec journal.Record) string {
		if l, ok := routes[rec.OperationType].(adapters.ObjectLinker); ok {
			return l.ObjectURL(rec.OperationType, rec.TargetObjectID)
		}
		return ""
	}
}

// scanConflicts reads the newest n results of the results stream and keeps
// the conflicts, newest first.
func scanConflicts(ctx context.Context, js jetstream.JetStream, stream string, n int) (console.ConflictScan, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return console.ConflictScan{}, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return console.ConflictScan{}, err
	}
	var scan console.ConflictScan
	if info.State.Msgs == 0 {
		return scan, nil
	}
	start := info.State.FirstSeq
	if info.State.LastSeq >= uint64(n) && info.State.LastSeq-uint64(n)+1 > start {
		start = info.State.LastSeq - uint64(n) + 1
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start})
	if err != nil {
		return console.ConflictScan{}, err
	}
	// Exactly the messages up to the last one: a fetch of more would wait
	// for messages that are not there.
	total := int(min(uint64(n), info.State.LastSeq-start+1))
	for scan.Scanned < total {
		batch, err := cons.Fetch(min(500, total-scan.Scanned), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return console.ConflictScan{}, err
		}
		got := 0
		last := uint64(0)
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			last = meta.Sequence.Stream
			if scan.Since.IsZero() {
				// The oldest result read: the scan says nothing of earlier ones.
				scan.Since = meta.Timestamp
			}
			var res operation.Result
			if json.Unmarshal(m.Data(), &res) == nil && res.Status == operation.ResultConflict {
				scan.Conflicts = append(scan.Conflicts, console.Conflict{Result: res, PublishedAt: meta.Timestamp})
			}
		}
		scan.Scanned += got
		if got == 0 || last >= info.State.LastSeq {
			break
		}
	}
	slices.Reverse(scan.Conflicts)
	return scan, nil
}

// processPage is the console's page of a process, from its trace.
func processPage(tr processTrace, th answer.Thresholds) console.ProcessPage {
	rec, v := tr.rec, tr.view
	a := process.Answer(th, v, rec.Name)
	p := console.ProcessPage{Key: rec.Key, Name: rec.Name, Status: string(rec.Status), CurrentStep: v.Step, FailedStep: rec.FailedStep,
		ErrorCode: rec.ErrorCode, Digest: rec.Digest, CreatedAt: rec.CreatedAt, CompletedAt: rec.CompletedAt,
		Next: string(a.NextAction), Reason: a.Reason, ResolvedBy: rec.ResolvedBy, ResolvedAt: rec.ResolvedAt, Evidence: rec.ResolutionEvidence}
	step := func(s process.StepView, name string) console.ProcessStep {
		return console.ProcessStep{Name: name, Operation: s.Operation, Key: s.OperationKey, Status: s.Status,
			ObjectID: s.TargetObjectID, ErrorCode: s.ErrorCode, Attempts: s.Attempts}
	}
	for _, s := range v.Steps {
		ps := step(s, s.Name)
		if s.Compensation != nil {
			cs := step(*s.Compensation, s.Name+"/compensate")
			ps.Compensation = &cs
		}
		p.Steps = append(p.Steps, ps)
	}
	for _, e := range tr.timeline {
		p.Timeline = append(p.Timeline, console.ProcessEvent{At: e.At, Step: e.Step, Kind: e.Kind, Worker: e.Worker,
			Outcome: e.Outcome, Error: e.Error, Note: e.Note, Token: e.Token})
	}
	return p
}
