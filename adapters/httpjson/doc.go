// Package httpjson is the adapter of a JSON-over-HTTP target declared in
// the configuration (adapters.http.<name>) instead of written in Go. The
// declaration (Config) says:
//
//   - where the operation key goes (KeyConfig: a header such as
//     Idempotency-Key, a body member such as externalCode, a query
//     parameter), with the target's longest key (longer keys go as a
//     stable digest, adapters.TargetKey);
//   - the create request (ExecuteConfig): method, URL and header
//     templates and a JSON body template over the payload fields
//     (template.go: ${payload.<field>}, ${key}, ${marker}, …), and how the
//     answer is read with JSON paths (github.com/tidwall/gjson syntax):
//     object id, business status, the key the target echoes, and the
//     members a found object must hold (Verify) for the key not to count
//     as reused with another payload;
//   - error rules (ErrorRule): status and body patterns mapped to retry,
//     reconcile_before_retry, never_retry, or lookup ("the key is taken":
//     the object is looked up and returned as a replay); Retry-After is
//     carried; unmatched answers take adapters.StatusError's defaults;
//   - lookup by key (LookupRequest, tried in order): a GET by external id
//     or a filtered search, an object counting only when it holds the key
//     (KeyPath) or the marker (MarkerPath); several objects are reported
//     as duplicates, the oldest kept;
//   - capabilities: native_key (the target deduplicates) or
//     lookup_before_create (it does not: Executes of one key are serialised
//     per process with adapters.KeyLocks, a retried one searches first, and
//     the objects created are remembered for settle_time, the search lag).
//
// Declarations that cannot keep the guarantees are refused by Validate
// (ErrUnsafeConfig): no key placement, no lookup, neither capability, a
// unique body key without a lookup rule, free-text fields outside the
// body, lookups that need the payload. Credentials come from a file or an
// environment variable only (AuthConfig); errors never hold a body.
//
// The matching emulator is sandbox/generic, whose contract the emulate
// package (outside adapters: no adapters package but a *test suite reaches
// the emulators) derives from the same declaration; httpjsontest holds the three declared targets
// the contract suite runs (a native idempotency header, a unique external
// id with lookup, a search with lag).
//
// Imports: adapters, operation, the standard library and tidwall/gjson.
package httpjson
