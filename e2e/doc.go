// Package e2e is idemgate's acceptance suite: the eight
// checks ("Проверка результата") and a SIGKILL take-over, run end to end
// against the real binary.
//
// The tests build `idemgate` once (with -race), run several daemon replicas
// as subprocesses sharing one embedded JetStream server and one PostgreSQL
// schema, send commands with the producer client, and count effects in the
// sandbox emulators' ledgers (1C, YooKassa, T-Bank, Bitrix24, and a target
// and operation type declared in the configuration, on the generic
// emulator) — not only equal
// responses. Faults (a response lost after the target committed, a slow
// target, failing lookups) come from the sandboxes.
//
// The package holds tests only. They may import anything in the module; no
// other package imports this one. PostgreSQL comes from TEST_DATABASE_URL
// (see journal/postgres/pgtest); without it the suite is skipped loudly, or
// fails when CI or IDEMGATE_REQUIRE_POSTGRES is set.
package e2e
