package console

import (
	"errors"
	"net/http"
	"net/url"
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
	// ResolvedBy, ResolvedAt and Evidence: a person settled the process
	// after it was left for review.
	ResolvedBy string
	ResolvedAt time.Time
	Evidence   string
	// Form holds what was posted to settle it, shown again on an error.
	Form struct{ As, Evidence string }
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
	flash := ""
	if r.URL.Query().Get("resolved") != "" {
		flash = "Settled as " + p.Status + " and written to the journal"
		if r.URL.Query().Get("published") == "1" {
			flash += "; published as the process's result."
		} else {
			flash += "; the result was not published (the process's next command is answered with it)."
		}
	}
	c.render(w, r, http.StatusOK, "process.html", view{Title: p.Key, Nav: "operations", Flash: flash, Data: p})
}

// resolveProcess is POST /ui/process/resolve: an operator settles a process
// left for review (needs_review) after putting the targets right by hand,
// as succeeded or compensated, with the evidence. Nothing is sent to a
// target.
func (c *Console) resolveProcess(w http.ResponseWriter, r *http.Request, se session) {
	key := r.FormValue("key")
	if c.d.Process == nil || c.d.ResolveProcess == nil || !isProcessKey(key) {
		c.fail(w, r, http.StatusNotFound, "no process "+strconv.Quote(key)+" to settle here")
		return
	}
	res := journal.ProcessResolution{Key: key, Status: journal.ProcessStatus(r.FormValue("as")),
		Evidence: strings.TrimSpace(r.FormValue("evidence")), Operator: se.Name}
	_, err := c.d.ResolveProcess(r.Context(), res)
	published := "1"
	switch {
	case errors.Is(err, ErrNotPublished):
		published = "0"
		c.d.Log.Warn("console: process settled, result not published", "process_key", key, "error", err.Error())
	case errors.Is(err, journal.ErrInvalid):
		p, perr := c.d.Process(r.Context(), key)
		if perr != nil {
			c.failJournal(w, r, perr)
			return
		}
		p.Form.As, p.Form.Evidence = string(res.Status), res.Evidence
		c.render(w, r, http.StatusBadRequest, "process.html", view{Title: p.Key, Nav: "operations", Error: err.Error(), Data: p})
		return
	case errors.Is(err, journal.ErrNotFound):
		c.fail(w, r, http.StatusNotFound, "no process "+strconv.Quote(key)+" in the journal")
		return
	case errors.Is(err, journal.ErrIllegalTransition):
		c.fail(w, r, http.StatusConflict, err.Error())
		return
	case err != nil:
		c.failJournal(w, r, err)
		return
	}
	c.d.Log.Info("console: process settled", "process_key", key, "status", string(res.Status), "operator", se.Name)
	http.Redirect(w, r, "/ui/process?key="+url.QueryEscape(key)+"&resolved=1&published="+published, http.StatusSeeOther)
}
