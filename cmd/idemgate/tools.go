package main

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/journal"
)

// The tools (publish, trace, resolve, approve, reconcile) share these.

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openForTools opens the journal without migrating, for trace and resolve.
func openForTools(cmd *cobra.Command) (Config, journal.Store, error) {
	c, err := config(cmd)
	if err != nil {
		return c, nil, err
	}
	st, _, err := openJournal(cmd.Context(), c, quietLog(), readJournal)
	return c, st, err
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
