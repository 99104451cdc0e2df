package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql
var postgresFS embed.FS

//go:embed sqlite/*.sql
var sqliteFS embed.FS

// Postgres returns the PostgreSQL migrations, rooted at their folder.
func Postgres() fs.FS { return folder(postgresFS, "postgres") }

// SQLite returns the SQLite migrations, rooted at their folder.
func SQLite() fs.FS { return folder(sqliteFS, "sqlite") }

// folder is the embedded folder dir of files, rooted there.
func folder(files embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // the folder is embedded at build time
	}
	return sub
}
