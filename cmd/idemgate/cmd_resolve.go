package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/worker"
)

func resolveCmd(stdout io.Writer) *cobra.Command {
	var as, object, code, evidence, who string
	var force bool
	cmd := &cobra.Command{
		Use:   "resolve KEY --as succeeded|failed_final --evidence TEXT",
		Short: "Record an operator's decision on an operation that is not final, and publish it as its result",
		Long: `Record an operator's decision on an operation that is not final: unknown (even while a
reconciler holds it between or during lookups), failed_retryable, or started with an
expired lease. The decision takes the operation over with a new fencing token, so a
reconciler or worker that comes back later is refused, and is published as the command's
result. A final operation is refused. An operation whose execute lease is live (a call to
the target may be in flight) is refused unless --force: an effect may land after the
decision; the trail then records what the call found.`,
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
	f.StringVar(&as, "as", "", "succeeded or failed_final")
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
