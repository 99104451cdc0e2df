// Package adapters is the seam between the worker and the targets: the
// Adapter contract (Execute once with the operation key, Lookup by the key
// alone), the closed error classes with their safe codes, and what every
// HTTP adapter shares:
//
//   - Send and NewRequest: one exchange that knows whether the request was
//     written, never lets net/http re-send a keyed request by itself, and
//     classifies transport failures (not sent → retry; sent → reconcile);
//     a 5xx that came before the whole body was written is retry with a
//     *_before_request_written code, apart from the same status after it;
//   - HTTPConfig: what every adapter's configuration shares (name, timeout,
//     rate limit, injected logger, clock and environment), embedded squashed
//     in each adapter's Config with one set of defaults and checks;
//     LookupScan, the bounds of a lookup that scans by creation time from
//     just before the key's first attempt (YooKassa, Bitrix24, amoCRM); and
//     Credential, a secret given inline, as a file or as an environment
//     variable, held under the target's word for it (Token, Password,
//     SecretKey, WebhookCode: token, token_file, token_env, ...);
//     Configured and ConfiguredSecret, the first steps of every New;
//   - Client: the HTTP client plus the target account's client-side token
//     bucket (RateLimit), so requests wait for their slot instead of
//     meeting the target's 429/503 — a call's first requests in the place
//     it took before its attempt (Admitter, Client.Admit: first come, first
//     served), the others within the call — and a refusal for the target's
//     own limit slows the bucket (Refused, Throttled); and its authorization
//     (BasicAuth, BearerAuth); Client.JSON is the JSON exchange most targets
//     speak. The wire structs stay in each adapter, apart from the sandbox
//     emulators' own: an adapter and its emulator read the target's
//     documentation independently, so a misreading shows as a failing test;
//   - Attempt (WithAttempt, AttemptFrom, Retried): the worker tells an
//     adapter which attempt it runs and since when the journal knows the
//     key, so searches start there and a first attempt (or one after
//     attempts a rate limit held back: Fresh) skips looking for earlier
//     ones;
//   - Outcome.ReportDuplicates: several objects for one key in a target
//     are reported in the result (the worker logs and counts them);
//   - the rules for values written to targets or kept from their answers
//     (values.go): Marker, FormatMinor, Truncate, SafeToken; Invalid for an
//     operation no retry can cure, and NoEffect for a request that cannot
//     have had an effect;
//   - KeyLocks (single-flight per key), TargetKey.
//
// One package per target implements the contract, and httpjson any
// JSON-over-HTTP target declared in the configuration; adaptertest is the
// contract suite they all pass against their sandbox emulators.
//
// Imports: operation, redact, internal/crashpoint, internal/telemetry (span
// attributes), the standard library, golang.org/x/time/rate, prometheus'
// client_golang and OpenTelemetry's HTTP instrumentation.
package adapters
