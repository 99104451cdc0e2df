package sqljournal

import (
	"time"

	"github.com/idemgate/idemgate/journal"
)

// SearchKind is which of an engine's static statements serves a search: one
// per kind of search, each read along its own index.
type SearchKind uint8

// The kinds of search, by the field that selects rows.
const (
	// SearchAll lists along the time index, filtered by the shared filters.
	SearchAll SearchKind = iota
	// SearchKey reads one key ($8: the key).
	SearchKey
	// SearchOpen filters on an open status (started, failed_retryable,
	// unknown) through the partial index of the open operations ($8: the
	// status); a final status, common, is filtered along the time index
	// (SearchAll).
	SearchOpen
	// SearchEvent reads by event id ($8).
	SearchEvent
	// SearchObject reads by target object id ($8).
	SearchObject
	// SearchIntent reads the key ranges of an intent (the engine's ranges
	// argument, $8 on).
	SearchIntent
	// SearchKinds counts the kinds.
	SearchKinds
)

// SearchFilterArgs is how many arguments every kind shares, before its own:
// $1 status, $2 operation type, $3 from, $4 to (created_at), $5 and $6 the
// keyset cursor (created_at, key), $7 the page size. An unset filter is NULL.
const SearchFilterArgs = 7

// Search picks the statement kind that serves q and its arguments: the
// shared filters, then the kind's own. at turns a time into the engine's
// argument; ranges turns the intent's key ranges into the engine's
// arguments. q is valid (SearchQuery.Validate).
func Search(q journal.SearchQuery, at func(time.Time) any, ranges func([]journal.IntentRange) []any) (SearchKind, []any) {
	opt := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	optTime := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return at(t)
	}
	args := make([]any, SearchFilterArgs, SearchFilterArgs+2)
	args[0], args[1], args[2], args[3] = opt(string(q.Status)), opt(q.OperationType), optTime(q.From), optTime(q.To)
	args[6] = q.Limit
	if q.After != nil {
		args[4], args[5] = at(q.After.CreatedAt), q.After.Key
	}
	switch {
	case q.Key != "":
		return SearchKey, append(args, q.Key)
	case q.EventID != "":
		return SearchEvent, append(args, q.EventID)
	case q.TargetObjectID != "":
		return SearchObject, append(args, q.TargetObjectID)
	case q.IntentID != "":
		return SearchIntent, append(args, ranges(q.IntentRanges())...)
	}
	if q.Status != "" && !q.Status.Terminal() {
		return SearchOpen, append(args, string(q.Status))
	}
	return SearchAll, args
}

// StatusCounts counts operations by status and type (rows for
// ScanStatusCount); both engines' SQL.
const StatusCounts = `SELECT status, operation_type, count(*) FROM agent_operation_log
GROUP BY status, operation_type ORDER BY operation_type, status`
