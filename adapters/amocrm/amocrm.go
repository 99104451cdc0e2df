package amocrm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// Operation types this adapter performs.
const (
	OpDealCreate = operation.TypeDealCreate
	OpTaskCreate = operation.TypeTaskCreate
)

// Adapter is the amoCRM adapter. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	client *adapters.Client
	locks  adapters.KeyLocks
}

var _ adapters.Adapter = (*Adapter)(nil)

// New validates cfg (after WithDefaults), resolves the token and returns the
// adapter.
func New(cfg Config) (*Adapter, error) {
	cfg, tok, err := adapters.ConfiguredSecret(cfg, adapters.Wrapping("amocrm: token: %w"))
	if err != nil {
		return nil, err
	}
	return &Adapter{cfg: cfg, client: cfg.NewClient(adapters.BearerAuth(tok))}, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem returns "crm".
func (a *Adapter) TargetSystem() string { return "crm" }

// Admit reserves a call's first requests (the search and the create) in the
// client-side bucket (nil without a limit): the worker waits for them
// before it takes an attempt.
func (a *Adapter) Admit(operation.Operation) *adapters.Admission { return a.client.Admit(2) }

// Capabilities: no native key, the key in a field/tag/marker of ours,
// single-flight, search lag as settle time.
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{Lookup: true, SingleFlight: true, MappingTable: true, SettleTime: a.cfg.SettleTime, MaxKeyLen: a.cfg.MaxKeyLen}
}

func bad(msg string) error {
	return adapters.Invalid(errors.New("amocrm: " + msg))
}

func numericID(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

func (a *Adapter) request(ctx context.Context, method, path string, q url.Values, body any) (*adapters.HTTPResponse, error) {
	u := a.cfg.BaseURL + path
	if q != nil {
		u += "?" + q.Encode()
	}
	return a.client.JSON(ctx, method, u, body, http.Header{"Accept": {"application/hal+json, application/json"}})
}

func (a *Adapter) statusError(resp *adapters.HTTPResponse) *adapters.Error {
	e := adapters.StatusError(resp, a.cfg.Clock())
	if e == nil {
		return adapters.Unexpected(adapters.ReconcileBeforeRetry, "amocrm: unexpected HTTP %d", resp.StatusCode)
	}
	if resp.StatusCode == http.StatusConflict {
		e = adapters.NewError(adapters.CodeUnexpectedResponse, adapters.ReconcileBeforeRetry, errors.New("amocrm: HTTP 409"))
	}
	if resp.StatusCode == http.StatusPaymentRequired {
		e = adapters.NewError(adapters.CodeAuthorizationDenied, adapters.NeverRetry, errors.New("amocrm: account unpaid (HTTP 402)"))
	}
	return e
}

// lookupError: a failed search is never a final answer about the operation.
func lookupError(err error) error {
	e := adapters.AsError(err)
	if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
		c := *e
		c.Class = adapters.ReconcileBeforeRetry
		return &c
	}
	return e
}

// Execute creates the lead or task once per key (single-flight).
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	key := adapters.TargetKey(op.Key.String(), a.cfg.MaxKeyLen)
	var create func() (adapters.Outcome, error)
	var search func() (found, error)
	switch op.Type {
	case OpDealCreate:
		l, err := a.leadOf(op, key)
		if err != nil {
			return adapters.Outcome{}, err
		}
		search = func() (found, error) { return a.searchLead(ctx, key) }
		create = func() (adapters.Outcome, error) { return a.create(ctx, "lead", []leadIn{l}, l.RequestID) }
	case OpTaskCreate:
		t, err := a.taskOf(op, key)
		if err != nil {
			return adapters.Outcome{}, err
		}
		search = func() (found, error) { return a.searchTask(ctx, key) }
		create = func() (adapters.Outcome, error) { return a.create(ctx, "task", []taskIn{t}, t.RequestID) }
	default:
		return adapters.Outcome{}, bad(fmt.Sprintf("unsupported operation %q", op.Type))
	}
	unlock, err := a.locks.Lock(ctx, key)
	if err != nil {
		return adapters.Outcome{}, adapters.NewError(adapters.CodeRequestNotSent, adapters.Retry, fmt.Errorf("amocrm: wait for single-flight: %w", err))
	}
	defer unlock()

	f, err := search()
	if err != nil {
		return adapters.Outcome{}, adapters.NotSent(err)
	}
	if len(f.items) > 0 {
		if !f.items[0].sameAs(op, key) {
			return adapters.Outcome{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry, errors.New("amocrm: the object with this key holds another payload"))
		}
		return f.keep(true), nil
	}
	if f.exhausted {
		// The scan could not prove absence: creating now risks a duplicate.
		return adapters.Outcome{}, adapters.NewError("lookup_indeterminate", adapters.ReconcileBeforeRetry, errors.New("amocrm: search before create hit its page cap"))
	}
	out, err := create()
	if err != nil || !adapters.Retried(ctx) {
		return out, err
	}
	// A retried attempt searches again: an earlier attempt's object that
	// the search before could not see yet is a duplicate to report. (The
	// lead search lags [??]: what it cannot see yet, a later Lookup does.)
	again, err := search()
	if err != nil || len(again.items) < 2 {
		return out, nil
	}
	return again.keep(again.items[0].id != mustID(out.ObjectID)), nil
}

func mustID(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// Lookup searches by the key.
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	key := adapters.TargetKey(op.Key.String(), a.cfg.MaxKeyLen)
	var f found
	var err error
	switch op.Type {
	case OpDealCreate:
		f, err = a.searchLead(ctx, key)
	case OpTaskCreate:
		f, err = a.searchTask(ctx, key)
	default:
		return adapters.LookupResult{}, bad(fmt.Sprintf("unsupported operation %q", op.Type))
	}
	if err != nil {
		return adapters.LookupResult{}, lookupError(err)
	}
	switch {
	case len(f.items) > 0:
		res := adapters.LookupResult{Status: adapters.Found, Outcome: f.keep(true)}
		if len(f.items) > 1 {
			res.Code = adapters.CodeDuplicateObjects
		}
		return res, nil
	case f.exhausted:
		return adapters.LookupResult{Status: adapters.Indeterminate, Code: "lookup_page_cap"}, nil
	}
	return adapters.LookupResult{Status: adapters.NotFound}, nil
}

// --- leads ---

func (a *Adapter) leadOf(op operation.Operation, key string) (leadIn, error) {
	title, amount := op.String("title"), op.Int("amount_minor")
	switch {
	case title == "":
		return leadIn{}, bad("title is required")
	case op.String("customer_id") == "":
		return leadIn{}, bad("customer_id is required")
	case amount < 0:
		return leadIn{}, bad("amount_minor must not be negative")
	case amount%100 != 0:
		return leadIn{}, bad("amoCRM prices are whole currency units: amount_minor must be a multiple of 100")
	}
	name := title
	if *a.cfg.KeyInName {
		name += " " + adapters.Marker(key)
	}
	l := leadIn{Name: name, Price: amount / 100, PipelineID: a.cfg.PipelineID, RequestID: "0"}
	if st, ok := numericID(op.String("stage")); ok {
		l.StatusID = st
	}
	if a.cfg.KeyFieldID > 0 {
		l.CustomFieldsValues = []customField{{FieldID: a.cfg.KeyFieldID, Values: []fieldValue{{Value: key}}}}
	}
	l.Embedded.Tags = []tagIn{{Name: key}}
	if c, ok := numericID(op.String("customer_id")); ok {
		l.Embedded.Contacts = []idRef{{ID: c}}
	}
	return l, nil
}

func (a *Adapter) searchLead(ctx context.Context, key string) (found, error) {
	resp, err := a.request(ctx, http.MethodGet, "/api/v4/leads", url.Values{"query": {key}, "limit": {"50"}}, nil)
	if err != nil {
		return found{}, err
	}
	switch resp.StatusCode {
	case http.StatusNoContent:
		return found{}, nil
	case http.StatusOK:
	default:
		return found{}, a.statusError(resp)
	}
	leads, err := parseLeads(resp.Body)
	if err != nil {
		return found{}, err
	}
	var f found
	for _, l := range leads {
		if l.holdsKey(key, a.cfg.KeyFieldID) {
			f.add(item{kind: "lead", id: l.ID, name: l.Name, price: l.Price})
		}
	}
	f.sort()
	return f, nil
}

// create posts one object of kind ("lead", "task"; amoCRM takes a batch,
// body holds the one) and reads back its id by the batch's request_id.
func (a *Adapter) create(ctx context.Context, kind string, body any, requestID string) (adapters.Outcome, error) {
	resp, err := a.request(ctx, http.MethodPost, "/api/v4/"+kind+"s", nil, body)
	if err != nil {
		return adapters.Outcome{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return adapters.Outcome{}, a.statusError(resp)
	}
	id, err := parseCreated(resp.Body, kind+"s", requestID)
	if err != nil {
		return adapters.Outcome{}, err
	}
	return item{kind: kind, id: id}.outcome(false), nil
}

// --- tasks ---

func (a *Adapter) taskOf(op operation.Operation, key string) (taskIn, error) {
	title := op.String("title")
	if title == "" {
		return taskIn{}, bad("title is required")
	}
	resp, ok := numericID(op.String("responsible_id"))
	if !ok {
		return taskIn{}, bad("responsible_id must be a numeric amoCRM user id")
	}
	text := title
	if d := op.String("description"); d != "" {
		text += "\n" + d
	}
	text += "\n" + adapters.Marker(key)
	due := op.Time("deadline")
	if due.IsZero() {
		due = a.cfg.Clock().Add(DefaultTaskDue)
	}
	t := taskIn{Text: text, CompleteTill: due.Unix(), TaskTypeID: a.cfg.TaskTypeID, ResponsibleUserID: resp, RequestID: "0"}
	if c, ok := numericID(op.String("customer_id")); ok {
		t.EntityID, t.EntityType = c, "contacts"
	}
	return t, nil
}

func (a *Adapter) searchTask(ctx context.Context, key string) (found, error) {
	now := a.cfg.Clock()
	from := a.cfg.From(ctx, now)
	q := url.Values{
		"filter[updated_at][from]": {strconv.FormatInt(from.Unix(), 10)},
		"filter[updated_at][to]":   {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
		"limit":                    {"250"},
	}
	var f found
	for page := 1; page <= a.cfg.LookupMaxPages; page++ {
		q.Set("page", strconv.Itoa(page))
		resp, err := a.request(ctx, http.MethodGet, "/api/v4/tasks", q, nil)
		if err != nil {
			return found{}, err
		}
		if resp.StatusCode == http.StatusNoContent {
			f.sort()
			return f, nil
		}
		if resp.StatusCode != http.StatusOK {
			return found{}, a.statusError(resp)
		}
		tasks, err := parseTasks(resp.Body)
		if err != nil {
			return found{}, err
		}
		for _, t := range tasks {
			if strings.Contains(t.Text, adapters.Marker(key)) {
				// Pages are numbered over a list that tasks created meanwhile
				// shift: one task may come twice, and counts once.
				f.add(item{kind: "task", id: t.ID, name: t.Text, completed: t.IsCompleted})
			}
		}
		if len(tasks) < 250 {
			f.sort()
			return f, nil
		}
	}
	f.sort()
	f.exhausted = len(f.items) == 0
	return f, nil
}

// --- found objects ---

type item struct {
	kind      string
	id        int64
	name      string
	price     int64
	completed bool
}

type found struct {
	items     []item
	exhausted bool
}

func (f *found) add(it item) {
	for _, x := range f.items {
		if x.id == it.id {
			return
		}
	}
	f.items = append(f.items, it)
}

// keep is the outcome of an operation whose key f found: the oldest
// object, the others reported as duplicates.
func (f found) keep(replayed bool) adapters.Outcome {
	out := f.items[0].outcome(replayed)
	ids := make([]string, 0, len(f.items)-1)
	for _, it := range f.items[1:] {
		ids = append(ids, strconv.FormatInt(it.id, 10))
	}
	out.ReportDuplicates(ids)
	return out
}

func (f *found) sort() {
	for i := 1; i < len(f.items); i++ {
		for j := i; j > 0 && f.items[j].id < f.items[j-1].id; j-- {
			f.items[j], f.items[j-1] = f.items[j-1], f.items[j]
		}
	}
}

func (it item) sameAs(op operation.Operation, key string) bool {
	switch it.kind {
	case "lead":
		name := strings.TrimSuffix(strings.TrimSuffix(it.name, adapters.Marker(key)), " ")
		return name == op.String("title") && it.price*100 == op.Int("amount_minor")
	case "task":
		first, _, _ := strings.Cut(it.name, "\n")
		return first == op.String("title")
	}
	return false
}

func (it item) outcome(replayed bool) adapters.Outcome {
	status := "created"
	if it.kind == "task" {
		status = "open"
		if it.completed {
			status = "completed"
		}
	}
	d := map[string]any{"entity": it.kind, operation.DetailTargetReplayed: replayed}
	return adapters.Outcome{ObjectID: strconv.FormatInt(it.id, 10), BusinessStatus: status, Details: d}
}
