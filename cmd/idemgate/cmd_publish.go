package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/producer"
)

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
			res, err := cl.PublishAndWaitWith(ctx, command, parsed.Key.String(), producer.WaitOptions{
				MsgID: producer.MsgID(parsed),
				OnPending: func(r operation.Result) {
					if r.NextAction == "" {
						fmt.Fprintf(stderr, "pending: %s\n", r.OperationKey)
						return
					}
					fmt.Fprintf(stderr, "pending: %s next_action=%s reason=%s\n", r.OperationKey, r.NextAction, r.Reason)
				},
				// Said within two seconds, instead of waiting out --timeout
				// in silence when no daemon runs.
				Consumers:   map[string]string{c.NATS.CommandsStream: c.NATS.Durable, c.NATS.ProcessesStream: c.NATS.ProcessDurable},
				OnUnfetched: func(u producer.Unfetched) { fmt.Fprintf(stderr, "note: %s; waiting up to --timeout %s\n", u, timeout) },
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
