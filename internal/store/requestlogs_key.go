package store

import (
	"context"
	"database/sql"
)

// keyRequestLogsByTime is migration 0011: on PostgreSQL, request_logs'
// primary key moves from the request id alone to (account_id, at, id), the
// key SQLite's table has had since 0010, and the account index (account_id,
// at, id), which the new key repeats, goes.
//
// Why: request ids end in twelve random hex digits, so an index on the id
// alone takes each log at a random place. Once that index outgrows memory
// (100,000 logs an account, over many accounts), every insert reads a
// random page of it and dirties it; and each page dirtied after a
// checkpoint is written whole to the WAL again. Entries keyed by (account_id,
// at, id) go to the end of their account's run, pages that stay in memory.
// The index the table loses also costs its inserts: 10,000 logs into a
// table of 0010's three indexes took 65–77 ms, into one of 0011's two 56–70
// ms (same session, five rounds alternated; numbers in bench/RESULTS.md).
//
// What used the old key still worked: a retried log was skipped by the new
// one (the insert of 0011's release named no conflict target, so its writes
// and the previous release's both skipped it), the search by request id
// looked a log up by its account and time, and every page read the
// account's logs through the new key. SQLite has nothing to do. Migration
// 0012 (requestlogs.go) then packs the table's rows into batches and drops
// it.
func keyRequestLogsByTime(ctx context.Context, tx *sql.Tx, engine string) error {
	if engine != EnginePostgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `ALTER TABLE request_logs DROP CONSTRAINT request_logs_pkey;
ALTER TABLE request_logs ADD CONSTRAINT request_logs_pkey PRIMARY KEY (account_id, at, id);
DROP INDEX request_logs_account;`)
	return err
}
