package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/sqlite"
)

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
					return &exitError{code: exitMigrationsPending, err: errors.New("migrations pending")}
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
				return &exitError{code: exitMigrationsPending, err: errors.New("migrations pending")}
			}
			return nil
		},
	}
	status.Flags().BoolVar(&check, "check", false, "exit 3 when migrations are pending")
	cmd.AddCommand(up, status)
	return cmd
}
