// Package openapi writes the OpenAPI 3.1 document of idemgate's HTTP API
// (gateway/httpapi) for the operation types and processes a daemon serves:
// one request body per operation type and per process, built by the same
// schema code as the MCP tools' input schemas (gateway/mcp), so that the
// two faces cannot describe different inputs; the answer schema is the MCP
// tools' output schema; errors are RFC 9457 problem documents carrying the
// answer. The daemon serves it at GET /v1/openapi.json; the document for
// the built-in types is kept in docs/openapi.json.
//
// Imports: gateway (the served types and processes), gateway/mcp (the
// schemas), operation and process.
package openapi

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/idemgate/idemgate/gateway/mcp"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// Path is where the daemon serves the document.
const Path = "/v1/openapi.json"

// Spec is what the document describes.
type Spec struct {
	// Env is the daemon's environment: the intent id's length bound
	// depends on it (the operation key must fit).
	Env string
	// Version is the daemon's version, the document's info.version.
	Version string
	// Types are the operation types served, built-in and declared.
	Types []operation.Type
	// Processes are the declared processes.
	Processes []*process.Definition
	// Approvals: the approval endpoint is served (approvals are on).
	Approvals bool
}

type obj = map[string]any

// Document returns the OpenAPI 3.1 document for s, as indented JSON.
func Document(s Spec) ([]byte, error) {
	paths := obj{}
	types := append([]operation.Type(nil), s.Types...)
	sort.Slice(types, func(i, j int) bool { return types[i].Name < types[j].Name })
	schemas := obj{
		"Answer":   mcp.AnswerSchema(),
		"Problem":  problemSchema(),
		"Approval": approvalSchema(),
	}
	for _, t := range types {
		body, err := bodySchema(s.Env, t)
		if err != nil {
			return nil, err
		}
		name := "Body." + t.Name
		schemas[name] = body
		paths["/v1/operations/"+t.Name] = obj{"post": submitOp("submit_"+mcp.ToolName(t.Name), t.Name, submitSummary(t), name, false)}
	}
	paths["/v1/operations/{key}"] = obj{"get": getOp("get_operation", "An operation's answer, by its operation key", "operation")}
	for _, d := range s.Processes {
		body, err := bodySchema(s.Env, d.Input)
		if err != nil {
			return nil, err
		}
		name := "Body." + d.Operation
		schemas[name] = body
		paths["/v1/processes/"+d.Name] = obj{"post": submitOp("start_"+mcp.ToolName(d.Name), d.Operation,
			fmt.Sprintf("Run the process %s (%d steps, each made at most once)", d.Name, len(d.Steps)), name, true)}
	}
	if len(s.Processes) > 0 {
		paths["/v1/processes/{key}"] = obj{"get": getOp("get_process", "A process's answer, by its key: its state and each step's", "process")}
	}
	if s.Approvals {
		paths["/v1/operations/{key}/approval"] = obj{"post": approvalOp()}
	}
	doc := obj{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": obj{
			"title":   "idemgate HTTP API",
			"version": s.Version,
			"description": "Submit business operations so that one business intent makes at most one business effect. " +
				"Send one Idempotency-Key (the intent id) per business intent and reuse it unchanged on every retry; " +
				"follow the answer's next_action (done, poll, await_approval, retry_same_intent, fix_input, new_intent_required, human_review).",
			"license": obj{"name": "Apache-2.0", "identifier": "Apache-2.0"},
		},
		"paths": paths,
		"components": obj{
			"schemas":         schemas,
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer", "description": "http_api.token; an approver's token for decisions. None on loopback when no token is set."}},
			"headers":         headers(),
			"parameters": obj{
				"key": obj{"name": "key", "in": "path", "required": true, "description": "The operation key: <env>:<operation>:<intent_id>:<key_version>.",
					"schema": obj{"type": "string", "minLength": 1, "maxLength": operation.MaxKeyLen}},
			},
		},
		"security": []any{obj{"bearer": []any{}}},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// bodySchema is the request body of t: its input schema without the
// arguments HTTP carries in headers (intent_id in Idempotency-Key,
// approval_token in Idempotency-Approval); approval_id may come in the body.
func bodySchema(env string, t operation.Type) (*jsonschema.Schema, error) {
	in, err := mcp.InputSchema(env, t)
	if err != nil {
		return nil, err
	}
	delete(in.Properties, "intent_id")
	delete(in.Properties, "approval_token")
	req := in.Required[:0]
	for _, r := range in.Required {
		if r != "intent_id" {
			req = append(req, r)
		}
	}
	in.Required = req
	in.Description = fmt.Sprintf("The payload of %s (money as integer minor units).", t.Name)
	return in, nil
}

func submitSummary(t operation.Type) string {
	s := fmt.Sprintf("Submit %s to the %s target", t.Name, t.TargetSystem)
	if t.RequiresApproval || t.TargetSystem == "payments" {
		s += " (moves money: may wait for a person's approval)"
	}
	return s
}

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func headerRef(name string) obj { return obj{"$ref": "#/components/headers/" + name} }

func answerContent() obj { return obj{"application/json": obj{"schema": ref("Answer")}} }

func problemContent() obj { return obj{"application/problem+json": obj{"schema": ref("Problem")}} }

func problem(desc string, hdrs ...string) obj {
	r := obj{"description": desc, "content": problemContent()}
	if len(hdrs) > 0 {
		h := obj{}
		for _, n := range hdrs {
			h[n] = headerRef(n)
		}
		r["headers"] = h
	}
	return r
}

// submitOp is a POST of an operation type's (or a process's) command.
func submitOp(id, operationName, summary, body string, isProcess bool) obj {
	location := "Where to read the answer again: /v1/operations/{key}"
	if isProcess {
		location = "Where to read the answer again: /v1/processes/{key}"
	}
	return obj{
		"operationId": id,
		"summary":     summary,
		"description": "Operation " + operationName + ". The same Idempotency-Key with the same body is answered with the stored outcome and never executes twice; " +
			"another body under the same key is refused 409. Prefer: wait=N bounds how long the call waits for the outcome.",
		"parameters": []any{
			obj{"name": "Idempotency-Key", "in": "header", "required": true,
				"description": "The intent id: one per business intent, reused unchanged on every retry. A structured-field string (\"order-48291\") or a bare token.",
				"schema":      obj{"type": "string", "minLength": 1, "maxLength": operation.MaxKeyLen + 2}},
			obj{"name": "Idempotency-Approval", "in": "header", "required": false,
				"description": "A pre-signed approval token (a compact JWS your own system issued for exactly this request), or your approval reference (approval_id).",
				"schema":      obj{"type": "string", "minLength": 1, "maxLength": operation.MaxApprovalTokenLen}},
			obj{"name": "Prefer", "in": "header", "required": false, "description": "wait=N: wait up to N seconds for the outcome (0: answer at once).",
				"schema": obj{"type": "string", "pattern": "^\\s*wait\\s*=\\s*[0-9]+"}},
		},
		"requestBody": obj{"required": true, "content": obj{"application/json": obj{"schema": ref(body)}}},
		"responses": obj{
			"200": obj{"description": "Final: succeeded or failed_final (next_action done, human_review or new_intent_required).",
				"headers": obj{"Idempotent-Replayed": headerRef("Idempotent-Replayed")}, "content": answerContent()},
			"202": obj{"description": "Pending: poll the Location after Retry-After (next_action poll or await_approval).",
				"headers": obj{"Location": obj{"description": location, "schema": obj{"type": "string"}},
					"Retry-After": headerRef("Retry-After"), "Idempotent-Replayed": headerRef("Idempotent-Replayed")},
				"content": answerContent()},
			"400": problem("The Idempotency-Key (or Idempotency-Approval) header is missing, repeated or malformed; nothing was sent."),
			"401": problem("No or a wrong bearer token.", "WWW-Authenticate"),
			"404": problem("No such operation type, or no adapter serves it here."),
			"409": problem("The Idempotency-Key was used with another body: nothing was executed for this request (answer.existing is the first request's outcome)."),
			"413": problem("The body is larger than http_api.max_body."),
			"415": problem("The body is not JSON."),
			"422": problem("Rejected before anything was executed (next_action fix_input): answer.reason names the field."),
			"503": problem("Unavailable: the command could not be handed over; nothing is known to have happened. Retry with the same Idempotency-Key.", "Retry-After"),
		},
	}
}

// getOp reads an answer by key.
func getOp(id, summary, what string) obj {
	return obj{
		"operationId": id,
		"summary":     summary,
		"description": "Read again the answer of a " + what + " submitted earlier. Never executes anything.",
		"parameters":  []any{obj{"$ref": "#/components/parameters/key"}},
		"responses": obj{
			"200": obj{"description": "The answer, final or pending (a pending one carries Location and Retry-After).",
				"headers": obj{"Location": obj{"schema": obj{"type": "string"}}, "Retry-After": headerRef("Retry-After")},
				"content": answerContent()},
			"400": problem("A malformed key."),
			"401": problem("No or a wrong bearer token.", "WWW-Authenticate"),
			"404": problem("No " + what + " with that key in the journal."),
			"503": problem("The journal could not be read; ask again.", "Retry-After"),
		},
	}
}

func approvalOp() obj {
	return obj{
		"operationId": "decide_approval",
		"summary":     "A person's decision on an intent that waits for approval",
		"description": "Only an approver's token (approvals.approvers) decides; the agents' token is refused 403. The decision covers the waiting request's fingerprint.",
		"parameters":  []any{obj{"$ref": "#/components/parameters/key"}},
		"requestBody": obj{"required": true, "content": obj{"application/json": obj{"schema": obj{
			"type": "object", "additionalProperties": false, "required": []any{"decision", "reason"},
			"properties": obj{
				"decision": obj{"type": "string", "enum": []any{"approve", "deny"}},
				"reason":   obj{"type": "string", "minLength": 1, "description": "Why; kept in the trail, masked."},
			}}}}},
		"responses": obj{
			"200": obj{"description": "Recorded: the approval record after the decision.", "content": obj{"application/json": obj{"schema": ref("Approval")}}},
			"400": problem("A malformed decision."),
			"401": problem("No approver token."),
			"403": problem("Not an approver of this operation (or an agent's token)."),
			"404": problem("No approval request with that key, or approvals are off."),
			"405": problem("Only POST."),
			"409": problem("Refused: decided already, expired, finished, or another fingerprint."),
			"503": problem("The journal could not record it; send it again."),
		},
	}
}

func headers() obj {
	return obj{
		"Retry-After":         obj{"description": "Seconds to wait before asking again.", "schema": obj{"type": "string", "pattern": "^[0-9]+$"}},
		"Idempotent-Replayed": obj{"description": "true: answered with an outcome that already existed; nothing was sent again.", "schema": obj{"type": "string", "enum": []any{"true"}}},
		"WWW-Authenticate":    obj{"description": "The bearer challenge.", "schema": obj{"type": "string"}},
	}
}

func problemSchema() obj {
	return obj{
		"type": "object", "required": []any{"type", "title", "status"},
		"description": "RFC 9457 problem details, with the answer where there is one.",
		"properties": obj{
			"type":     obj{"type": "string", "description": "urn:idemgate:problem:<kind>"},
			"title":    obj{"type": "string"},
			"status":   obj{"type": "integer"},
			"detail":   obj{"type": "string"},
			"instance": obj{"type": "string"},
			"answer":   ref("Answer"),
		},
	}
}

func approvalSchema() obj {
	return obj{
		"type": "object", "required": []any{"operation_key", "state", "approvers", "approved", "request", "expires_at", "decisions"},
		"properties": obj{
			"operation_key": obj{"type": "string"},
			"state":         obj{"type": "string", "enum": []any{"pending", "approved", "denied", "expired"}},
			"approvers":     obj{"type": "integer", "minimum": 1},
			"approved":      obj{"type": "integer", "minimum": 0},
			"request":       obj{"type": "object", "description": "The significant fields the decision covers, masked."},
			"expires_at":    obj{"type": "string", "format": "date-time"},
			"decisions": obj{"type": "array", "items": obj{
				"type": "object", "required": []any{"approver", "decision", "reason", "fingerprint", "at"},
				"properties": obj{
					"approver":    obj{"type": "string"},
					"decision":    obj{"type": "string", "enum": []any{"approve", "deny"}},
					"reason":      obj{"type": "string"},
					"fingerprint": obj{"type": "string"},
					"at":          obj{"type": "string", "format": "date-time"},
				}}},
		},
	}
}
