package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql
var postgresFS embed.FS

// Postgres returns the PostgreSQL migrations, rooted at their folder.
func Postgres() fs.FS {
	sub, err := fs.Sub(postgresFS, "postgres")
	if err != nil {
		panic(err) // the folder is embedded at build time
	}
	return sub
}

//go:embed sqlite/*.sql
var sqliteFS embed.FS

// SQLite returns the SQLite migrations, rooted at their folder.
func SQLite() fs.FS {
	sub, err := fs.Sub(sqliteFS, "sqlite")
	if err != nil {
		panic(err) // the folder is embedded at build time
	}
	return sub
}
