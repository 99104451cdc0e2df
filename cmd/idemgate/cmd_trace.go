package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
)

func traceCmd(stdout io.Writer) *cobra.Command {
	var asJSON, unresolved bool
	cmd := &cobra.Command{
		Use:   "trace KEY",
		Short: "Show an operation from the agent's call to the target's object: the journal row and every attempt (a process: its steps as one timeline)",
		// Checked before the journal is opened (or, for SQLite, created).
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case unresolved && len(args) > 0:
				return errors.New("trace takes a KEY or --unresolved, not both")
			case !unresolved && len(args) != 1:
				return fmt.Errorf("trace needs one KEY (or --unresolved), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, st, err := openForTools(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if unresolved {
				l, err := c.Reconciler.Thresholds().ListUnresolved(cmd.Context(), st, 1000)
				if err != nil {
					return err
				}
				list, idle := l.Unknown, l.IdleRetry
				review, err := processesForReview(cmd.Context(), st)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(stdout, unresolvedJSON{Unknown: each(list, operationOf), IdleRetry: each(idle, operationOf),
						ProcessesNeedsReview: each(review, processOf)})
				}
				tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KEY\tSTATUS\tROUNDS\tERROR\tUPDATED\tRAISED\tWHAT TO DO")
				for _, r := range list {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Key, r.Status, r.ReconcileRounds, orDash(r.ErrorCode),
						r.UpdatedAt.UTC().Format(time.RFC3339), stamp(r.RaisedAt), "check the target, then idemgate resolve")
				}
				for _, r := range idle {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Key, r.Status, r.ReconcileRounds, orDash(r.ErrorCode),
						r.UpdatedAt.UTC().Format(time.RFC3339), stamp(r.RaisedAt), "not in the target: the agent must resend the command")
				}
				for _, p := range review {
					fmt.Fprintf(tw, "%s\t%s\t-\t%s\t%s\t%s\t%s\n", p.Key, p.Status, orDash(p.ErrorCode),
						p.UpdatedAt.UTC().Format(time.RFC3339), stamp(p.CompletedAt), "process step "+p.FailedStep+" could not be compensated: idemgate trace KEY, then settle it in the target by hand")
				}
				return tw.Flush()
			}
			if isProcessKey(args[0]) {
				reg, err := c.registry()
				if err != nil {
					return configError(err)
				}
				tr, err := traceProcess(cmd.Context(), st, reg, args[0])
				if errors.Is(err, journal.ErrNotFound) {
					return &exitError{code: exitUnknown, err: err}
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printProcessTraceJSON(stdout, tr)
				}
				return printProcessTrace(stdout, tr)
			}
			rec, err := st.Get(cmd.Context(), args[0])
			if errors.Is(err, journal.ErrNotFound) {
				return &exitError{code: exitUnknown, err: err}
			}
			if err != nil {
				return err
			}
			atts, err := st.Attempts(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			traces := attemptTraces(cmd.Context(), st, args[0])
			var appr *journal.Approval
			switch ap, err := st.Approval(cmd.Context(), args[0]); {
			case err == nil:
				appr = &ap
			case !errors.Is(err, journal.ErrNotFound):
				return err
			}
			a := c.Reconciler.Thresholds().FromRecord(rec, time.Now())
			if asJSON {
				return writeJSON(stdout, traceJSON{Operation: operationOf(rec), Answer: answerOf(a), Attempts: each(atts, attemptOf),
					AttemptTraceIDs: traces, Approval: approvalOf(appr)})
			}
			return printTrace(stdout, rec, a, atts, traces, appr)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output for tools")
	cmd.Flags().BoolVar(&unresolved, "unresolved", false, "list the unresolved (unknown outcomes after review_after lookups, retryable failures idle for idle_after) and processes left for review")
	return cmd
}

// printTrace prints an operation, its approval (nil: it needed none) and
// its attempts; traces are the attempts' trace ids by lease token (none
// when tracing was off).
func printTrace(w io.Writer, rec journal.Record, a answer.Answer, atts []journal.Attempt, traces map[int64]string, appr *journal.Approval) error {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	fmt.Fprintf(w, "operation  %s\n", rec.Key)
	fmt.Fprintf(w, "type       %s → %s\n", rec.OperationType, rec.TargetSystem)
	fmt.Fprintf(w, "status     %s\n", rec.Status)
	fmt.Fprintf(w, "answer     %s, next action %s: %s\n", a.Status, a.NextAction, a.Reason)
	fmt.Fprintf(w, "object     %s\n", orDash(rec.TargetObjectID))
	fmt.Fprintf(w, "result     %s\n", orDash(string(rec.Result)))
	fmt.Fprintf(w, "error      %s\n", orDash(rec.ErrorCode))
	fmt.Fprintf(w, "event      %s   approval %s\n", orDash(rec.EventID), orDash(rec.ApprovalID))
	fmt.Fprintf(w, "hash       %s\n", rec.RequestHash)
	fmt.Fprintf(w, "attempts   %d   reconcile rounds %d (%d in all)\n", rec.AttemptCount, rec.ReconcileRounds, rec.ReconcileRoundsTotal)
	if !rec.RaisedAt.IsZero() {
		fmt.Fprintf(w, "review     raised for an operator at %s\n", ts(rec.RaisedAt))
	}
	if rec.EffectPossible {
		fmt.Fprintf(w, "effect     possible: an attempt's outcome was unknown (looked up before any failed_final)\n")
	}
	until := "until"
	if rec.Status == journal.StatusFailedRetryable || rec.Status == journal.StatusUnknown {
		until = "held until" // the next attempt or lookup is not before
	}
	fmt.Fprintf(w, "lease      owner %s token %d %s %s\n", orDash(rec.LeaseOwner), rec.LeaseToken, until, ts(rec.LeaseUntil))
	fmt.Fprintf(w, "created    %s   completed %s\n\n", ts(rec.CreatedAt), ts(rec.CompletedAt))
	if appr != nil {
		fmt.Fprintf(w, "approval   %s: %d of %d approvals; requested by %s at %s, waits until %s\n", appr.State, appr.Approved(), appr.Approvers,
			orDash(appr.RequestedBy), ts(appr.RequestedAt), ts(appr.ExpiresAt))
		fmt.Fprintf(w, "           decided %s   carried out %s\n", ts(appr.DecidedAt), ts(appr.ReleasedAt))
		fmt.Fprintf(w, "shown      %s\n", appr.Display)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DECIDED\tBY\tDECISION\tREASON\tFINGERPRINT")
		for _, v := range appr.Votes {
			by := v.Approver
			if v.TokenID != "" {
				by += " (token " + v.TokenID + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ts(v.At), by, v.Vote, orDash(v.Reason), v.RequestHash)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKIND\tWORKER\tTOKEN\tSTARTED\tFINISHED\tOUTCOME\tERROR\tTARGET REQUEST\tTRACE\tNOTE")
	for _, a := range atts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Kind, a.Worker, a.Token,
			ts(a.StartedAt), ts(a.FinishedAt), orDash(string(a.Outcome)), orDash(a.ErrorCode), orDash(a.TargetRequestID),
			orDash(traces[a.Token]), orDash(a.Note))
	}
	return tw.Flush()
}
