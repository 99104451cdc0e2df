package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/worker"
)

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
