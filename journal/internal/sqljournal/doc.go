// Package sqljournal is what the PostgreSQL and SQLite journals share above
// their drivers: the record's column list and how a row of it is read into a
// journal.Record, the reads that turn rows into the journal's values (keys,
// attempts, counts, trace ids), which static statement serves a console
// search and with which arguments, and the migration listings. Each engine
// keeps its SQL, its connection handling and its time representation (a
// TimeColumn: timestamptz on PostgreSQL, milliseconds on SQLite); a rule
// about the rows exists here once.
//
// Rows are read through Row and Rows, which pgx's and database/sql's rows
// both satisfy. It imports journal of this module, and goose; never an
// engine.
package sqljournal
