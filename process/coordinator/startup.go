package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// ErrStranded: a change of configuration would leave running processes
// unable to finish; the daemon refuses to start with it (exit 78).
var ErrStranded = errors.New("the configuration would strand running processes")

// Prepare readies a daemon's processes at start: it keeps every configured
// definition in the journal by digest (a process that starts on it can
// finish on it whatever the configuration says later), and checks every
// process still running or compensating: the definition it started on
// must still compile against today's operation types (reg), and every
// operation it sends must be routed to an adapter here (routed; nil: not
// checked). Those definitions are added to set. A process that could not
// finish is refused, named with its definition and why (ErrStranded).
// running is how many processes are running or compensating.
func Prepare(ctx context.Context, ps journal.ProcessStore, set *process.Set, reg *operation.Registry, routed func(op string) bool) (running int, err error) {
	for _, d := range set.Definitions() {
		if err := ps.SaveDefinition(ctx, journal.ProcessDefinition{Digest: d.Digest, Name: d.Name, Body: d.Body}); err != nil {
			return 0, err
		}
	}
	open, err := ps.ListProcesses(ctx, []journal.ProcessStatus{journal.ProcessRunning, journal.ProcessCompensating}, 100000)
	if err != nil {
		return 0, err
	}
	byDigest := map[string][]string{}
	for _, p := range open {
		byDigest[p.Digest] = append(byDigest[p.Digest], p.Key)
	}
	digests := make([]string, 0, len(byDigest))
	for d := range byDigest {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	var errs []error
	for _, digest := range digests {
		keys := byDigest[digest]
		def, ok := set.ByDigest(digest)
		if !ok {
			def, err = Keep(ctx, ps, set, reg, digest)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: %s: %w", ErrStranded, names(keys), err))
				continue
			}
		}
		if routed == nil {
			continue
		}
		var missing []string
		for _, op := range def.Uses() {
			if !routed(op) {
				missing = append(missing, op)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%w: %s run on process %s (digest %.12s), which sends %s: no route serves it here (routes: in the configuration)",
				ErrStranded, names(keys), def.Name, digest, strings.Join(missing, ", ")))
		}
	}
	return len(open), errors.Join(errs...)
}

// names lists process keys for an error, at most ten.
func names(keys []string) string {
	if len(keys) > 10 {
		return fmt.Sprintf("%s and %d more", strings.Join(keys[:10], ", "), len(keys)-10)
	}
	return strings.Join(keys, ", ")
}
