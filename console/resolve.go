package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/journal"
)

// Resolving: the form (with a "look up now" that asks the target through
// the adapter), a confirmation page that shows what the target says of the
// decision, and the decision itself. A decision the target's lookup
// contradicts (another object holds the key, or none does, or the target
// holds the effect of an operation said to have failed) is recorded only
// when the operator overrides the lookup, and the trail says so.

type resolveData struct {
	Rec      journal.Record
	As       string
	Obj      string
	Code     string
	Evid     string
	Force    bool
	Override bool
	// Lookup is a "look up now" answer on the form; CanLookUp: the console
	// has adapters to ask.
	Lookup    *Lookup
	LookupMsg string
	CanLookUp bool
	// Check is what the target says of the decision (confirmation page).
	Check check
}

func (c *Console) resolveData(r *http.Request) (resolveData, error) {
	key := r.FormValue("key")
	rec, err := c.d.Store.Get(r.Context(), key)
	if err != nil {
		return resolveData{}, err
	}
	code := r.FormValue("code")
	if code == "" && r.Method == http.MethodGet {
		code = "operator_resolved"
	}
	return resolveData{Rec: rec, As: r.FormValue("as"), Obj: strings.TrimSpace(r.FormValue("object")), Code: strings.TrimSpace(code),
		Evid: strings.TrimSpace(r.FormValue("evidence")), Force: r.FormValue("force") == "on", Override: r.FormValue("override") == "on",
		CanLookUp: c.d.Looker != nil}, nil
}

func (c *Console) resolution(d resolveData, se session) journal.Resolution {
	res := journal.Resolution{Key: d.Rec.Key, Status: journal.Status(d.As), Evidence: d.Evid, Operator: se.Name, Force: d.Force}
	if res.Status == journal.StatusSucceeded {
		res.TargetObjectID = d.Obj
	} else {
		res.ErrorCode = d.Code
	}
	return res
}

func (c *Console) resolveLoadFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, journal.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "no operation "+strconv.Quote(r.FormValue("key"))+" in the journal")
		return
	}
	c.failJournal(w, r, err)
}

func (c *Console) resolveForm(w http.ResponseWriter, r *http.Request, _ session) {
	d, err := c.resolveData(r)
	if err != nil {
		c.resolveLoadFailed(w, r, err)
		return
	}
	if d.Rec.Status.Terminal() {
		c.fail(w, r, http.StatusConflict, journal.ResolveRefused(d.Rec).Error())
		return
	}
	c.render(w, r, http.StatusOK, "resolve.html", view{Title: "Resolve " + d.Rec.Key, Nav: "unresolved", Data: d})
}

// resolveLookup asks the target now what it holds for the key and shows
// the form again with the answer, the object found filled in where the
// operator typed none. Nothing is written.
func (c *Console) resolveLookup(w http.ResponseWriter, r *http.Request, se session) {
	d, err := c.resolveData(r)
	if err != nil {
		c.resolveLoadFailed(w, r, err)
		return
	}
	if d.Rec.Status.Terminal() {
		c.fail(w, r, http.StatusConflict, journal.ResolveRefused(d.Rec).Error())
		return
	}
	l, why := c.lookUp(r.Context(), d.Rec)
	if l == nil {
		d.LookupMsg = "Not looked up: " + why + "."
	} else {
		d.Lookup, d.LookupMsg = l, l.describe()
		c.d.Log.Info("console: looked up for an operator", "operation_key", d.Rec.Key, "lookup", string(l.Status), "operator", se.Name)
		switch {
		case l.Status == LookupFound && !l.Final && d.Obj == "":
			d.As, d.Obj = string(journal.StatusSucceeded), l.ObjectID
		case l.Status == LookupFound && l.Final && d.As == "":
			d.As = string(journal.StatusFailedFinal)
		}
	}
	c.render(w, r, http.StatusOK, "resolve.html", view{Title: "Resolve " + d.Rec.Key, Nav: "unresolved", Data: d})
}

// resolveConfirm checks the decision, asks the target what it holds for the
// key, and shows both for confirmation; nothing is written yet.
func (c *Console) resolveConfirm(w http.ResponseWriter, r *http.Request, se session) {
	d, err := c.resolveData(r)
	if err != nil {
		c.resolveLoadFailed(w, r, err)
		return
	}
	if err := c.resolution(d, se).Validate(); err != nil {
		c.render(w, r, http.StatusBadRequest, "resolve.html", view{Title: "Resolve " + d.Rec.Key, Nav: "unresolved", Error: err.Error(), Data: d})
		return
	}
	d.Check = c.checkDecision(r.Context(), d.Rec, journal.Status(d.As), d.Obj)
	d.Override = false
	c.render(w, r, http.StatusOK, "confirm.html", view{Title: "Confirm", Nav: "unresolved", Data: d})
}

// resolve records the confirmed decision through Deps.Resolve, after the
// target's lookup agreed with it, or could not tell, or the operator
// overrode it (the trail then keeps what the lookup said).
func (c *Console) resolve(w http.ResponseWriter, r *http.Request, se session) {
	d, err := c.resolveData(r)
	if err != nil {
		c.resolveLoadFailed(w, r, err)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, http.StatusBadRequest, "resolve.html", view{Title: "Resolve " + d.Rec.Key, Nav: "unresolved",
			Error: "the decision was not confirmed", Data: d})
		return
	}
	res := c.resolution(d, se)
	if err := res.Validate(); err != nil {
		c.render(w, r, http.StatusBadRequest, "resolve.html", view{Title: "Resolve " + d.Rec.Key, Nav: "unresolved", Error: err.Error(), Data: d})
		return
	}
	if d.Rec.Status.Terminal() {
		c.fail(w, r, http.StatusConflict, journal.ResolveRefused(d.Rec).Error())
		return
	}
	// The check is made again here: the confirmation page's may be old, and
	// a form can be posted without it.
	d.Check = c.checkDecision(r.Context(), d.Rec, res.Status, res.TargetObjectID)
	if d.Check.Contradicts {
		if !d.Override {
			c.render(w, r, http.StatusConflict, "confirm.html", view{Title: "Confirm", Nav: "unresolved",
				Error: "the target's lookup disagrees with this decision: nothing was recorded; change it, or tick the override to record it all the same", Data: d})
			return
		}
		res.Evidence += " [recorded over the target's lookup, which said: " + d.Check.Message + "]"
		c.d.Log.Warn("console: decision recorded over the target's lookup", "operation_key", res.Key, "operator", se.Name, "lookup", d.Check.Message)
	}
	rec, err := c.d.Resolve(r.Context(), res)
	published := "1"
	switch {
	case errors.Is(err, ErrNotPublished):
		published = "0"
		c.d.Log.Warn("console: resolution recorded, result not published", "operation_key", res.Key, "error", err.Error())
	case errors.Is(err, journal.ErrInvalid):
		c.render(w, r, http.StatusBadRequest, "resolve.html", view{Title: "Resolve " + d.Rec.Key, Nav: "unresolved", Error: err.Error(), Data: d})
		return
	case errors.Is(err, journal.ErrIllegalTransition):
		c.fail(w, r, http.StatusConflict, err.Error())
		return
	case err != nil:
		c.failJournal(w, r, err)
		return
	}
	c.d.Log.Info("console: operation resolved", "operation_key", rec.Key, "status", string(rec.Status), "operator", se.Name)
	http.Redirect(w, r, "/ui/operation?key="+url.QueryEscape(rec.Key)+"&resolved=1&published="+published, http.StatusSeeOther)
}
