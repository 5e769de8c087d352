package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/backend"
)

func (a *app) newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations and print the schema version",
		Long: `Apply the backend's pending schema migrations and print the version in
force. Opening a SQL backend migrates too; this command makes it explicit,
e.g. before rolling out new workers. Backends without a schema (memory:,
sync:) say so and change nothing.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd.Context(), func(b backend.Backend) error {
				m, ok := b.(backend.Migrator)
				if !ok {
					scheme, _, _ := strings.Cut(a.db, ":")
					fmt.Fprintf(a.out, "the %s backend has no schema to migrate\n", scheme)
					return nil
				}
				v, err := m.Migrate(cmd.Context())
				if err != nil {
					return fmt.Errorf("migrate %s: %w", a.db, err)
				}
				fmt.Fprintf(a.out, "schema version %d\n", v)
				return nil
			})
		},
	}
}
