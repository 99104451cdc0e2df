package sqljournal

import (
	"github.com/pressly/goose/v3"

	"github.com/idemgate/idemgate/journal"
)

// Versions lists the versions of goose's results, in their order.
func Versions(res []*goose.MigrationResult) []int64 {
	out := make([]int64, 0, len(res))
	for _, r := range res {
		out = append(out, r.Source.Version)
	}
	return out
}

// States lists every migration of goose's status with whether it is applied.
func States(st []*goose.MigrationStatus) []journal.MigrationState {
	out := make([]journal.MigrationState, 0, len(st))
	for _, s := range st {
		out = append(out, journal.MigrationState{Version: s.Source.Version, Source: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out
}

// Pending lists the versions of goose's status not applied.
func Pending(st []*goose.MigrationStatus) []int64 {
	var out []int64
	for _, s := range st {
		if s.State != goose.StateApplied {
			out = append(out, s.Source.Version)
		}
	}
	return out
}
