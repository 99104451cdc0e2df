// Package sqljournal is what the PostgreSQL and SQLite journals share above
// their drivers, so that a rule about the rows exists once: the record's
// column list and how a row of it is read into a journal.Record; Reader, the
// plain reads of both engines (Get, FieldDigests, Attempts, the lists, the
// console's journal.Browser, AttemptTraceIDs) on an engine's statements;
// which static statement serves a console search and with which arguments;
// the goose migration steps; the purge loop, the heartbeat's lost leases,
// the resolution's refusal and the configuration defaults. Each engine
// keeps its SQL, its connections and transactions, its claim and completion
// paths, and its time representation (a TimeColumn: timestamptz on
// PostgreSQL, milliseconds on SQLite).
//
// Rows are read through Row and Rows, which pgx's and database/sql's rows
// both satisfy. It imports journal of this module, and goose; never an
// engine.
package sqljournal
