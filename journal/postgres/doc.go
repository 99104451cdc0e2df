// Package postgres is the PostgreSQL journal on pgx/v5: the article's atomic
// claim (INSERT … ON CONFLICT DO NOTHING RETURNING, then a conditional,
// row-locking take-over of only the rows whose state may change, then a plain
// read to decide the rest), batched so that a whole fetch batch is claimed,
// completed or heartbeated in one round trip. No transaction stays open during
// a call to a target. Migrations are applied with goose under an advisory lock.
//
// It imports journal and migrations.
package postgres
