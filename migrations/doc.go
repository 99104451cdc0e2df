// Package migrations holds the journal's SQL migrations, embedded in the
// binary, one folder per database engine. Files are goose migrations named
// NNNN_name.sql, zero-padded and without gaps, each with its Up and its Down
// (journaltest.ExerciseMigrations runs both on each engine). The engines
// (journal/postgres, journal/sqlite) apply them; `idemgate migrate up`
// applies them explicitly.
//
// It imports only the standard library (embed, io/fs).
package migrations
