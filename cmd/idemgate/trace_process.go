package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// isProcessKey reports whether key is a process's key
// (<env>:process.<name>:<intent>:<version>).
func isProcessKey(key string) bool {
	k, err := operation.ParseKey(key)
	if err != nil {
		return false
	}
	_, ok := process.IsProcess(k.Operation)
	return ok
}

// timelineEntry is one line of a process's timeline: the process's own
// moments and every attempt of its steps and compensations.
type timelineEntry struct {
	At      time.Time `json:"at"`
	Step    string    `json:"step"`
	Kind    string    `json:"kind"`
	Worker  string    `json:"worker,omitempty"`
	Token   int64     `json:"lease_token,omitempty"`
	Outcome string    `json:"outcome,omitempty"`
	Error   string    `json:"error_code,omitempty"`
	Note    string    `json:"note,omitempty"`
}

// processTrace is what trace shows of a process.
type processTrace struct {
	rec      journal.ProcessRecord
	view     process.View
	timeline []timelineEntry
}

// traceProcess reads a process, its definition (kept by digest) and every
// step's and compensation's row and attempts.
func traceProcess(ctx context.Context, st journal.Store, reg *operation.Registry, key string) (processTrace, error) {
	ps, ok := st.(journal.ProcessStore)
	if !ok {
		return processTrace{}, fmt.Errorf("this journal keeps no processes")
	}
	rec, err := ps.GetProcess(ctx, key)
	if err != nil {
		return processTrace{}, err
	}
	kept, err := ps.Definition(ctx, rec.Digest)
	if err != nil {
		return processTrace{}, err
	}
	name, decl, err := process.Parse(kept.Body)
	if err != nil {
		return processTrace{}, err
	}
	def, err := process.Compile(name, decl, reg)
	if err != nil {
		return processTrace{}, fmt.Errorf("the definition process %s runs on no longer compiles here: %w", key, err)
	}
	v, err := process.Describe(ctx, def, rec, st.Get)
	if err != nil {
		return processTrace{}, err
	}
	tr := processTrace{rec: rec, view: v}
	tr.timeline = append(tr.timeline, timelineEntry{At: rec.CreatedAt, Step: "process", Kind: "started", Worker: rec.LeaseOwner})
	for _, s := range v.Steps {
		for _, sv := range []*process.StepView{&s, s.Compensation} {
			if sv == nil || sv.Status == process.StepNotStarted {
				continue
			}
			name := sv.Name
			if sv != &s {
				name += "/compensate"
			}
			atts, err := st.Attempts(ctx, sv.OperationKey)
			if err != nil {
				return processTrace{}, err
			}
			for _, a := range atts {
				tr.timeline = append(tr.timeline, timelineEntry{At: a.StartedAt, Step: name, Kind: string(a.Kind), Worker: a.Worker,
					Token: a.Token, Outcome: string(a.Outcome), Error: a.ErrorCode, Note: a.Note})
			}
		}
	}
	if !rec.CompletedAt.IsZero() {
		e := timelineEntry{At: rec.CompletedAt, Step: "process", Kind: string(rec.Status), Error: rec.ErrorCode, Note: orEmptyStep(rec.FailedStep)}
		if rec.Resolved() {
			// It had come to rest at needs_review (its failed compensation's
			// attempt is above); a person settled it.
			e = timelineEntry{At: rec.ResolvedAt, Step: "process", Kind: "resolved_as_" + string(rec.Status), Worker: "operator:" + rec.ResolvedBy,
				Token: rec.LeaseToken, Error: rec.ErrorCode, Note: rec.ResolutionEvidence}
		}
		tr.timeline = append(tr.timeline, e)
	}
	sort.SliceStable(tr.timeline, func(i, j int) bool { return tr.timeline[i].At.Before(tr.timeline[j].At) })
	return tr, nil
}

func orEmptyStep(step string) string {
	if step == "" {
		return ""
	}
	return "step " + step
}

// printProcessTrace prints a process and its steps as one timeline.
func printProcessTrace(w io.Writer, tr processTrace) error {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	rec, v := tr.rec, tr.view
	fmt.Fprintf(w, "process    %s\n", rec.Key)
	fmt.Fprintf(w, "name       %s (definition %.12s)\n", rec.Name, rec.Digest)
	fmt.Fprintf(w, "status     %s\n", rec.Status)
	if rec.FailedStep != "" || rec.ErrorCode != "" {
		fmt.Fprintf(w, "failed     step %s (%s)\n", orDash(rec.FailedStep), orDash(rec.ErrorCode))
	}
	if v.Step != "" {
		fmt.Fprintf(w, "current    step %s\n", v.Step)
	}
	fmt.Fprintf(w, "event      %s   approval %s\n", orDash(rec.EventID), orDash(rec.ApprovalID))
	fmt.Fprintf(w, "hash       %s\n", rec.RequestHash)
	fmt.Fprintf(w, "lease      owner %s token %d until %s\n", orDash(rec.LeaseOwner), rec.LeaseToken, ts(rec.LeaseUntil))
	fmt.Fprintf(w, "created    %s   completed %s\n", ts(rec.CreatedAt), ts(rec.CompletedAt))
	if rec.Resolved() {
		fmt.Fprintf(w, "resolved   as %s by %s at %s\nevidence   %s\n", rec.Status, rec.ResolvedBy, ts(rec.ResolvedAt), rec.ResolutionEvidence)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tOPERATION\tSTATUS\tOBJECT\tERROR\tATTEMPTS\tKEY")
	for _, s := range v.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Operation, s.Status, orDash(s.TargetObjectID), orDash(s.ErrorCode), s.Attempts, s.OperationKey)
		if c := s.Compensation; c != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name+"/compensate", c.Operation, c.Status, orDash(c.TargetObjectID), orDash(c.ErrorCode), c.Attempts, c.OperationKey)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSTEP\tKIND\tWORKER\tTOKEN\tOUTCOME\tERROR\tNOTE")
	for _, e := range tr.timeline {
		token := "-"
		if e.Token != 0 {
			token = fmt.Sprint(e.Token)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ts(e.At), e.Step, e.Kind, orDash(e.Worker), token,
			orDash(e.Outcome), orDash(e.Error), orDash(e.Note))
	}
	return tw.Flush()
}

// printProcessTraceJSON is trace --json for a process.
func printProcessTraceJSON(w io.Writer, tr processTrace) error {
	return writeJSON(w, processTraceJSON{Process: processOf(tr.rec), Steps: tr.view.Steps, Timeline: tr.timeline})
}

// processesForReview lists the processes left for a person (trace
// --unresolved).
func processesForReview(ctx context.Context, st journal.Store) ([]journal.ProcessRecord, error) {
	ps, ok := st.(journal.ProcessStore)
	if !ok {
		return nil, nil
	}
	return ps.ListProcesses(ctx, []journal.ProcessStatus{journal.ProcessNeedsReview}, 1000)
}
