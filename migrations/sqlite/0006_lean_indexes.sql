-- +goose Up
-- PostgreSQL's 0006 makes keys compare bytewise and drops its status index.
-- Here keys compare bytewise already (BINARY), and the status index stays:
-- SQLite reads a partial index only for a query that repeats the index's
-- condition, which the reconciler's scans do not.
SELECT 1;

-- +goose Down
SELECT 1;
