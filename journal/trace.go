package journal

import "context"

// AttemptTraces is implemented by stores that keep the trace id of each
// attempt (migration 0004), for `idemgate trace KEY` to name the trace of
// each call. The daemon writes it only while tracing is on.
type AttemptTraces interface {
	// SetAttemptTrace records traceID (32 hex digits) on the attempt of key
	// made under token. An attempt that does not exist is left alone.
	SetAttemptTrace(ctx context.Context, key string, token int64, traceID string) error
	// AttemptTraceIDs returns the recorded trace ids of key's attempts, by
	// their lease token.
	AttemptTraceIDs(ctx context.Context, key string) (map[int64]string, error)
}
