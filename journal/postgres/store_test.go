package postgres_test

import (
	"testing"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/journaltest"
	"github.com/idemgate/idemgate/journal/postgres/pgtest"
)

func TestConformance(t *testing.T) {
	journaltest.Exercise(t, func(t *testing.T) journal.Store {
		return pgtest.Store(t)
	}, journaltest.Features{ConcurrentTakeOver: true})
}
