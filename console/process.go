package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/journal"
)

// ProcessPage is what the console shows of a business process: its record,
// each step and compensation (the operation it sent, its state and object)
// and one timeline of the process's moments and every attempt of its steps.
type ProcessPage struct {
	Key, Name, Status, CurrentStep, FailedStep, ErrorCode string
	Digest                                                string
	CreatedAt, CompletedAt                                time.Time
	// Next and Reason are what every face answers for the process now.
	Next, Reason string
	Steps        []ProcessStep
	Timeline     []ProcessEvent
}

// ProcessStep is a step or a compensation of a process.
type ProcessStep struct {
	Name, Operation, Key, Status, ObjectID, ErrorCode string
	Attempts                                          int
	Compensation                                      *ProcessStep
}

// ProcessEvent is one line of a process's timeline.
type ProcessEvent struct {
	At                                       time.Time
	Step, Kind, Worker, Outcome, Error, Note string
	Token                                    int64
}

// isProcessKey reports whether key names a process
// (<env>:process.<name>:<intent>:<version>).
func isProcessKey(key string) bool {
	_, rest, ok := strings.Cut(key, ":")
	return ok && strings.HasPrefix(rest, "process.")
}

// process is GET /ui/process?key=…: a process and its steps as one page.
func (c *Console) process(w http.ResponseWriter, r *http.Request, _ session) {
	key := r.URL.Query().Get("key")
	if c.d.Process == nil {
		c.fail(w, r, http.StatusNotFound, "this daemon declares no processes")
		return
	}
	if !isProcessKey(key) {
		c.fail(w, r, http.StatusNotFound, "no process "+strconv.Quote(key)+": a process key is <env>:process.<name>:<intent>:<version>")
		return
	}
	p, err := c.d.Process(r.Context(), key)
	if errors.Is(err, journal.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "no process "+strconv.Quote(key)+" in the journal")
		return
	}
	if err != nil {
		c.failJournal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "process.html", view{Title: p.Key, Nav: "operations", Data: p})
}
