package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/ingest"
)

func ingestCmd(stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "ingest",
		Short: "Run the webhook-to-queue server alone: each verified notification becomes one command on JetStream",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config(cmd)
			if err != nil {
				return err
			}
			if len(c.Ingest.Sources) == 0 {
				return configError(errNoSources)
			}
			log := newLogger(c, stderr)
			stopTracing, err := startTracing(cmd.Context(), log)
			if err != nil {
				return err
			}
			defer stopTracing()
			nc, js, stop, err := natsConn(c, log, false)
			if err != nil {
				return err
			}
			defer stop()
			// The commands stream must exist before a webhook is acknowledged.
			if _, err := ensureStreams(cmd.Context(), nc, js, c, log); err != nil {
				return err
			}
			srv, err := ingest.New(c.Ingest.Config, js, log)
			if err != nil {
				return configError(err)
			}
			log.Info("webhook ingest", "addr", c.Ingest.Addr, "sources", len(c.Ingest.Sources))
			return srv.ListenAndServe(cmd.Context())
		},
	}
}

var errNoSources = errors.New("ingest.sources: no webhook source is configured")
