package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/sqlite"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
	"github.com/idemgate/idemgate/worker"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func migrateCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "migrate", Short: "Apply or inspect journal migrations"}
	up := &cobra.Command{
		Use: "up", Short: "Apply pending migrations (advisory-locked: safe from several replicas)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config(cmd)
			if err != nil {
				return err
			}
			var applied []int64
			if c.Journal.URL != "" {
				st, err := postgres.Open(cmd.Context(), c.Journal.URL, postgres.Config{Migrations: journal.SkipMigrations})
				if err != nil {
					return err
				}
				defer st.Close()
				applied, err = postgres.Migrate(cmd.Context(), st.Pool(), nil)
				if err != nil {
					return err
				}
			} else {
				if err := movedDataDir(c, "journal.db"); err != nil {
					return configError(err)
				}
				if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
					return err
				}
				applied, err = sqlite.Migrate(cmd.Context(), sqlitePath(c.DataDir), nil)
				if err != nil {
					return err
				}
			}
			fmt.Fprintf(stdout, "applied %d migration(s) %v\n", len(applied), applied)
			return nil
		},
	}
	var check bool
	status := &cobra.Command{
		Use: "status", Short: "List migrations; --check exits 3 when some are pending", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config(cmd)
			if err != nil {
				return err
			}
			if c.Journal.URL == "" {
				p, err := sqlite.Pending(cmd.Context(), sqlitePath(c.DataDir))
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "sqlite journal: pending=%v\n", p)
				if check && p {
					return &exitError{code: 3, err: errors.New("migrations pending")}
				}
				return nil
			}
			st, err := postgres.Open(cmd.Context(), c.Journal.URL, postgres.Config{Migrations: journal.SkipMigrations})
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := postgres.Migrations(cmd.Context(), st.Pool())
			if err != nil {
				return err
			}
			pending := false
			for _, m := range list {
				state := "applied"
				if !m.Applied {
					state, pending = "pending", true
				}
				fmt.Fprintf(stdout, "%04d %-8s %s\n", m.Version, state, m.Source)
			}
			if check && pending {
				return &exitError{code: 3, err: errors.New("migrations pending")}
			}
			return nil
		},
	}
	status.Flags().BoolVar(&check, "check", false, "exit 3 when migrations are pending")
	cmd.AddCommand(up, status)
	return cmd
}

func publishCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		file, event, op, intent, approval, payload string
		wait                                       bool
		timeout                                    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish a command (from flags or a JSON file) with its Nats-Msg-Id; --wait prints the result",
		Example: `  idemgate publish --operation payment.charge --event evt-1 --approval appr-1 \
    --payload '{"account_id":"merchant-account-17","order_id":"order-48291","amount_minor":125000,"currency":"RUB"}' --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config(cmd)
			if err != nil {
				return err
			}
			var command operation.Command
			if file != "" {
				body, err := os.ReadFile(file)
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				if err := json.Unmarshal(body, &command); err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("%s: %w", file, err)}
				}
			} else {
				command = operation.Command{EventID: event, Operation: op, IntentID: intent, ApprovalID: approval, Payload: json.RawMessage(payload)}
			}
			// Validate locally first: a bad command gets its reason here.
			reg, err := c.registry()
			if err != nil {
				return configError(err)
			}
			parsed, err := decodeCommand(c, reg, command)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			nc, err := natsClient(c)
			if err != nil {
				return err
			}
			defer nc.Close()
			cl, err := producer.New(nc, c.NATS.ResultsStream)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if !wait {
				ack, err := cl.PublishWith(ctx, command, producer.PublishOptions{MsgID: producer.MsgID(parsed)})
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "published %s as stream sequence %d (duplicate=%v), key %s\n", command.EventID, ack.Sequence, ack.Duplicate, parsed.Key)
				return nil
			}
			res, err := cl.PublishAndWaitWith(ctx, command, parsed.Key.String(), producer.MsgID(parsed), func(r operation.Result) {
				if r.NextAction == "" {
					fmt.Fprintf(stderr, "pending: %s\n", r.OperationKey)
					return
				}
				fmt.Fprintf(stderr, "pending: %s next_action=%s reason=%s\n", r.OperationKey, r.NextAction, r.Reason)
			})
			var late *producer.WaitError
			if errors.As(err, &late) {
				return &exitError{code: exitPending, err: err}
			}
			if err != nil {
				return err
			}
			if res.OperationKey != "" && res.OperationKey != parsed.Key.String() {
				fmt.Fprintf(stderr, "note: the daemon answered for %s, not %s (env %q here): give publish, trace and resolve the daemon's configuration\n",
					res.OperationKey, parsed.Key, c.Env)
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(res); err != nil {
				return err
			}
			if code := resultExit(res.Status); code != exitOK {
				return &exitError{code: code, err: fmt.Errorf("the result is %s (%s): exit %d", res.Status, orNoCode(res.ErrorCode), code)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "command envelope JSON file")
	f.StringVar(&event, "event", "", "event_id (the Nats-Msg-Id is the operation key and the payload's fingerprint: a copy is dropped, a changed payload is answered conflict)")
	f.StringVar(&op, "operation", "", "operation type, e.g. payment.charge")
	f.StringVar(&intent, "intent", "", "intent_id (default: the event id)")
	f.StringVar(&approval, "approval", "", "approval_id for money-moving operations")
	f.StringVar(&payload, "payload", "{}", "payload JSON")
	f.BoolVar(&wait, "wait", false, "wait for the result and print it")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for JetStream and, with --wait, for the result")
	return cmd
}

// resultExit is publish --wait's exit code for a final result's status:
// 0 only for succeeded, and one code per other status, so that a script
// never takes a conflict or a refusal for success.
func resultExit(s operation.ResultStatus) int {
	switch s {
	case operation.ResultSucceeded:
		return exitOK
	case operation.ResultFailedFinal:
		return exitFailedFinal
	case operation.ResultConflict:
		return exitConflict
	case operation.ResultRejected:
		return exitRejected
	case operation.ResultPending:
		return exitPending
	}
	return exitFailure
}

func orNoCode(code string) string {
	if code == "" {
		return "no error code"
	}
	return code
}

// openForTools opens the journal without migrating, for trace and resolve.
func openForTools(cmd *cobra.Command) (Config, journal.Store, error) {
	c, err := config(cmd)
	if err != nil {
		return c, nil, err
	}
	st, _, err := openJournal(cmd.Context(), c, quietLog(), readJournal)
	return c, st, err
}

func traceCmd(stdout io.Writer) *cobra.Command {
	var asJSON, unresolved bool
	cmd := &cobra.Command{
		Use:   "trace KEY",
		Short: "Show an operation from the agent's call to the target's object: the journal row and every attempt (a process: its steps as one timeline)",
		Args:  cobra.RangeArgs(0, 1),
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
					return json.NewEncoder(stdout).Encode(jsonObject{
						{string(answer.KindUnknown), toolJSON(list)}, {string(answer.KindIdleRetry), toolJSON(idle)}, {"processes_needs_review", toolJSON(review)},
					})
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
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: errors.New("trace needs a KEY (or --unresolved)")}
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
					return processTraceJSON(stdout, tr)
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
			a := c.Reconciler.Thresholds().FromRecord(rec, time.Now())
			if asJSON {
				return json.NewEncoder(stdout).Encode(jsonObject{{"operation", toolJSON(rec)},
					{"answer", jsonObject{{"status", a.Status}, {"next_action", string(a.NextAction)}, {"reason", a.Reason}}},
					{"attempts", toolJSON(atts)}, {"attempt_trace_ids", traces}})
			}
			return printTrace(stdout, rec, a, atts, traces)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output for tools")
	cmd.Flags().BoolVar(&unresolved, "unresolved", false, "list the unresolved (unknown outcomes after review_after lookups, retryable failures idle for idle_after) and processes left for review")
	return cmd
}

// printTrace prints an operation and its attempts; traces are the attempts'
// trace ids by lease token (none when tracing was off).
func printTrace(w io.Writer, rec journal.Record, a answer.Answer, atts []journal.Attempt, traces map[int64]string) error {
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
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKIND\tWORKER\tTOKEN\tSTARTED\tFINISHED\tOUTCOME\tERROR\tTARGET REQUEST\tTRACE\tNOTE")
	for _, a := range atts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Kind, a.Worker, a.Token,
			ts(a.StartedAt), ts(a.FinishedAt), orDash(string(a.Outcome)), orDash(a.ErrorCode), orDash(a.TargetRequestID),
			orDash(traces[a.Token]), orDash(a.Note))
	}
	return tw.Flush()
}

// stamp is a time for a table cell, "-" when zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

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

func reconcileCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "Run one reconciliation pass: look unknown outcomes and expired leases up in their targets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config(cmd)
			if err != nil {
				return err
			}
			log := newLogger(c, stderr)
			routes, err := buildAdapters(c, log, nil)
			if err != nil {
				return configError(err)
			}
			st, _, err := openJournal(cmd.Context(), c, log, readJournal)
			if err != nil {
				return err
			}
			defer st.Close()
			deps := worker.Deps{Store: st, Adapters: routes, Log: log}
			// Settled operations' results go to JetStream: nats.url, or the
			// embedded server of a running daemon. Without one the journal
			// still settles, and each command's next delivery replays the
			// result once the daemon runs.
			nc, js, err := toolJetStream(c)
			switch {
			case err == nil:
				defer nc.Close()
				deps.JS = js
			case c.NATS.URL == "":
				fmt.Fprintf(stderr, "note: %v\nresults are not published now; each command's next delivery replays its result once the daemon runs\n", err)
			default:
				return err
			}
			r, err := worker.NewReconciler(c.Reconciler, c.Worker, deps)
			if err != nil {
				return configError(err)
			}
			s, err := r.RunOnce(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "found %d, not found %d, unsettled %d, raised for review %d, retryable and idle %d, failed %d\n",
				s.Found, s.NotFound, s.Unsettled, s.Raised, s.IdleRetryable, s.Failed)
			if s.Failed > 0 {
				return fmt.Errorf("%d settlements or journal reads failed (see the log above)", s.Failed)
			}
			return nil
		},
	}
}
