package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/ingest"
)

func ingestCmd(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Run the webhook-to-queue server alone: each verified notification becomes one command on JetStream",
	}
	noSources := func(c *Config) error {
		if len(c.Ingest.Sources) == 0 {
			return configError(errNoSources)
		}
		return nil
	}
	return serving(cmd, stderr, noSources, func(ctx context.Context, c Config, log *slog.Logger) error {
		// The commands stream must exist before a webhook is acknowledged.
		_, js, stop, err := commandStreams(ctx, c, log)
		if err != nil {
			return err
		}
		defer stop()
		srv, err := ingest.New(c.Ingest.Config, js, log)
		if err != nil {
			return configError(err)
		}
		log.Info("webhook ingest", "addr", c.Ingest.Addr, "sources", len(c.Ingest.Sources))
		return srv.ListenAndServe(ctx)
	})
}

var errNoSources = errors.New("ingest.sources: no webhook source is configured")
