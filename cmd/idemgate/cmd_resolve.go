package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/wire"
	"github.com/idemgate/idemgate/worker"
)

func resolveCmd(stdout io.Writer) *cobra.Command {
	var as, object, code, evidence, who string
	var force bool
	cmd := &cobra.Command{
		Use:   "resolve KEY --as succeeded|failed_final|compensated --evidence TEXT",
		Short: "Record an operator's decision on an operation that is not final, or a process left for review, and publish it as its result",
		Long: `Record an operator's decision on an operation that is not final: unknown (even while a
reconciler holds it between or during lookups), failed_retryable, or started with an
expired lease. The decision takes the operation over with a new fencing token, so a
reconciler or worker that comes back later is refused, and is published as the command's
result. A final operation is refused. An operation whose execute lease is live (a call to
the target may be in flight) is refused unless --force: an effect may land after the
decision; the trail then records what the call found.

A process key settles a process left for review (needs_review: a compensation
failed for good, or a step's key held another request) after a person put the
targets right by hand: --as succeeded (what the process was for is done) or
--as compensated (what it did is undone). Nothing is sent to a target; the
settlement is recorded with the evidence, ends the process's review and is
published as the process's result.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, st, err := openForTools(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if who == "" {
				who = os.Getenv("USER")
			}
			if isProcessKey(args[0]) {
				if object != "" || force || cmd.Flags().Changed("code") {
					return &exitError{code: exitUsage, err: errors.New("resolve: --object, --code and --force are for operations; a process is settled with --as succeeded|compensated and --evidence")}
				}
				return resolveProcess(cmd, c, st, journal.ProcessResolution{Key: args[0], Status: journal.ProcessStatus(as),
					Evidence: evidence, Operator: who}, stdout)
			}
			rec, err := worker.Resolve(cmd.Context(), worker.Deps{Store: st, Answers: c.Reconciler.Thresholds()}, journal.Resolution{Key: args[0], Status: journal.Status(as),
				TargetObjectID: object, ErrorCode: code, Evidence: evidence, Operator: who, Force: force})
			switch {
			case errors.Is(err, journal.ErrNotFound):
				return &exitError{code: exitUnknown, err: err}
			case errors.Is(err, journal.ErrInvalid):
				return &exitError{code: exitUsage, err: err}
			case err != nil:
				return err
			}
			fmt.Fprintf(stdout, "%s resolved as %s by %s (lease token %d)\n", rec.Key, rec.Status, who, rec.LeaseToken)
			if err := publishResolved(cmd.Context(), c, rec); err != nil {
				fmt.Fprintf(stdout, "result not published (%v): the command's next delivery replays it\n", err)
				return nil
			}
			fmt.Fprintf(stdout, "result published: %s\n", rec.Status)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&as, "as", "", "succeeded or failed_final (an operation); succeeded or compensated (a process)")
	f.StringVar(&object, "object", "", "the target's object id (required with --as succeeded)")
	f.StringVar(&code, "code", "operator_resolved", "safe error code (with --as failed_final)")
	f.StringVar(&evidence, "evidence", "", "why: what was checked in the target")
	f.StringVar(&who, "operator", "", "who resolves (default $USER)")
	f.BoolVar(&force, "force", false, "take over even a live execute lease (its call may still land)")
	return cmd
}

// publishResolved publishes an operator's decision as the command's result
// on the configured NATS (the embedded server's address when none is
// configured: the daemon's). It gives up at once when NATS does not answer.
func publishResolved(ctx context.Context, c Config, rec journal.Record) error {
	nc, js, err := toolJetStream(c)
	if err != nil {
		return err
	}
	defer nc.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return worker.PublishResult(pctx, js, c.Reconciler.Thresholds(), rec)
}

// resolveProcess records an operator's settlement of a process left for
// review and publishes the process's answer as its result.
func resolveProcess(cmd *cobra.Command, c Config, st journal.Store, r journal.ProcessResolution, stdout io.Writer) error {
	reg, err := c.registry()
	if err != nil {
		return configError(err)
	}
	var js jetstream.JetStream
	nc, tjs, jsErr := toolJetStream(c)
	if jsErr == nil {
		defer nc.Close()
		js = tjs
	}
	rec, view, err := settleProcess(cmd.Context(), st, reg, js, r)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return &exitError{code: exitUnknown, err: err}
	case errors.Is(err, journal.ErrInvalid):
		return &exitError{code: exitUsage, err: err}
	case errors.Is(err, errNotPublished):
		fmt.Fprintf(stdout, "%s settled as %s by %s (lease token %d)\n", rec.Key, rec.Status, rec.ResolvedBy, rec.LeaseToken)
		fmt.Fprintf(stdout, "result not published (%v): the process's next command is answered with it\n", err)
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "%s settled as %s by %s (lease token %d)\n", rec.Key, rec.Status, rec.ResolvedBy, rec.LeaseToken)
	if js == nil {
		fmt.Fprintf(stdout, "result not published (%v): the process's next command is answered with it\n", jsErr)
		return nil
	}
	fmt.Fprintf(stdout, "result published: %s\n", view.Status)
	return nil
}

// errNotPublished: a settlement was recorded, its result not published.
var errNotPublished = errors.New("result not published")

// settleProcess records an operator's settlement of a process left for
// review and, with js, publishes the process's answer as its result (the
// CLI's resolve and the console's call it). A recorded settlement whose
// result could not be published returns the record with errNotPublished.
func settleProcess(ctx context.Context, st journal.Store, reg *operation.Registry, js jetstream.JetStream, r journal.ProcessResolution) (journal.ProcessRecord, process.View, error) {
	ps, ok := st.(journal.ProcessStore)
	if !ok {
		return journal.ProcessRecord{}, process.View{}, errors.New("this journal keeps no processes")
	}
	rec, err := ps.ResolveProcess(ctx, r)
	if err != nil {
		return rec, process.View{}, err
	}
	if js == nil {
		return rec, process.View{}, nil
	}
	tr, err := traceProcess(ctx, st, reg, rec.Key)
	if err != nil {
		return rec, process.View{}, fmt.Errorf("%w: %w", errNotPublished, err)
	}
	res, err := process.Result(tr.view, rec.EventID, false)
	var m *nats.Msg
	if err == nil {
		m, err = consumer.ResultMsg(res)
	}
	if err == nil {
		// Its own message id: the results stream would take the settlement
		// of a compensated process for a copy of the needs_review answer
		// (both failed_final) and drop it.
		m.Header.Set(wire.HeaderMsgID, wire.ResultMsgID(rec.Key, "settled_"+string(res.Status), 0))
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = js.PublishMsg(pctx, m)
	}
	if err != nil {
		return rec, tr.view, fmt.Errorf("%w: %w", errNotPublished, err)
	}
	return rec, tr.view, nil
}
