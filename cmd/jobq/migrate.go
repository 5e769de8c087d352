package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/backend"
)

func (a *app) newMigrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create the schema or apply pending migrations, and print its version",
		Long: `Create the jobq schema in the store --db names, or apply its pending
migrations, and print the version in force. worker, enqueue and demo also
create and migrate as needed; stats and failed never do, and point here
when --db holds no jobq schema. Run it before rolling out new workers, or to
create a store on purpose (a new SQLite file, a new Postgres jobq_schema).
memory: and sync: keep nothing beyond one process and are refused.`,
		Args:    exactArgs(0, "no arguments"),
		PreRunE: a.requireDurable,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd.Context(), mayCreate, func(b backend.Backend) error {
				m, ok := backend.As[backend.Migrator](b)
				if !ok {
					fmt.Fprintf(a.out, "the %s backend has no schema to migrate\n", schemeOf(a.db))
					return nil
				}
				v, err := m.Migrate(cmd.Context())
				if err != nil {
					return err // the backend names the store and the step
				}
				fmt.Fprintf(a.out, "schema version %d\n", v)
				return nil
			})
		},
	}
}
