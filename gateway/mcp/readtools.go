// The read-only tools, get_operation and list_unresolved. Their arguments
// are read here, not by the SDK's schema validation, so that bad input is
// answered like every other outcome: status rejected, next_action
// fix_input, in structured content.

package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/answer"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/operation"
)

// GetOperationInput is get_operation's input.
type GetOperationInput struct {
	OperationKey string `json:"operation_key,omitempty"`
	Operation    string `json:"operation,omitempty"`
	IntentID     string `json:"intent_id,omitempty"`
}

func addGetOperation(srv *sdk.Server, g *gateway.Gateway, out *jsonschema.Schema) {
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	tool := &sdk.Tool{
		Name:  "get_operation",
		Title: "Get an operation's outcome",
		Description: "Read an operation's outcome from idemgate's journal, by operation_key or by operation + intent_id: status, the target's object id, " +
			"attempts. Read-only; it never executes anything. Use it when an answer said poll. " + nextActionHelp,
		InputSchema: &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
			Properties: map[string]*jsonschema.Schema{
				"operation_key": str("the operation_key an earlier answer gave"),
				"operation":     str("the operation type (e.g. payment.charge), with intent_id, when the key is not at hand"),
				"intent_id":     str("the intent_id of the call, with operation"),
			}},
		OutputSchema: out,
		Annotations:  &sdk.ToolAnnotations{Title: "Get an operation's outcome", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
	srv.AddTool(tool, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in GetOperationInput
		if bad := readArgs(req.Params.Arguments, map[string]any{"operation_key": &in.OperationKey, "operation": &in.Operation, "intent_id": &in.IntentID}); bad != "" {
			return toolResult(rejectedArgs(bad))
		}
		switch {
		case in.OperationKey != "":
			return toolResult(g.Lookup(ctx, in.OperationKey, true))
		case in.Operation != "" && in.IntentID != "":
			return toolResult(g.LookupIntent(ctx, in.Operation, in.IntentID, true))
		}
		a := rejectedArgs("give operation_key, or operation and intent_id")
		a.ErrorCode = string(operation.CodeMissingField)
		return toolResult(a)
	})
}

// UnresolvedInput is list_unresolved's input.
type UnresolvedInput struct {
	Limit int `json:"limit,omitempty"`
}

// maxUnresolved bounds list_unresolved's limit.
const maxUnresolved = 1000

// UnresolvedOutput is list_unresolved's answer. When no list can be given,
// operations is empty and the answer's own members say why and what to do:
// rejected/fix_input for bad arguments, unavailable/retry_same_intent when
// the journal could not be read.
type UnresolvedOutput struct {
	Operations   []gateway.Answer   `json:"operations"`
	Status       string             `json:"status,omitempty"`
	ErrorCode    string             `json:"error_code,omitempty"`
	Reason       string             `json:"reason,omitempty"`
	NextAction   gateway.NextAction `json:"next_action,omitempty"`
	RetryAfterMS int64              `json:"retry_after_ms,omitempty"`
}

func addListUnresolved(srv *sdk.Server, g *gateway.Gateway, answer *jsonschema.Schema) {
	str := func(desc string) *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Description: desc} }
	tool := &sdk.Tool{
		Name:  "list_unresolved",
		Title: "List operations that need someone",
		Description: "List operations idemgate could not settle alone: outcomes the target could not confirm after repeated lookups " +
			"(next_action human_review) and temporary failures nobody is retrying any more (next_action retry_same_intent). Read-only.",
		InputSchema: &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
			Properties: map[string]*jsonschema.Schema{
				"limit": {Type: "integer", Minimum: ptr(1.0), Maximum: ptr(float64(maxUnresolved)),
					Description: fmt.Sprintf("at most this many of each kind (default 100, at most %d)", maxUnresolved)},
			}},
		OutputSchema: &jsonschema.Schema{Type: "object", Required: []string{"operations"},
			Properties: map[string]*jsonschema.Schema{
				"operations":     {Type: "array", Items: answer},
				"status":         str("Only when no list could be given: rejected (bad arguments) or unavailable (the journal could not be read)."),
				"error_code":     str("With status: the safe error code."),
				"reason":         str("With status: what went wrong and what to do."),
				"next_action":    {Type: "string", Enum: []any{string(gateway.FixInput), string(gateway.RetrySameIntent)}, Description: "With status: fix_input or retry_same_intent."},
				"retry_after_ms": {Type: "integer", Minimum: ptr(0.0)},
			}},
		Annotations: &sdk.ToolAnnotations{Title: "List operations that need someone", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
	srv.AddTool(tool, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var limit json.Number
		if bad := readArgs(req.Params.Arguments, map[string]any{"limit": &limit}); bad != "" {
			return unresolvedResult(unresolvedFailure(rejectedArgs(bad)))
		}
		in := UnresolvedInput{}
		if limit != "" {
			n, err := limit.Int64()
			if err != nil || n < 1 || n > maxUnresolved {
				return unresolvedResult(unresolvedFailure(rejectedArgs(fmt.Sprintf("limit: must be a whole number from 1 to %d", maxUnresolved))))
			}
			in.Limit = int(n)
		}
		list, err := g.Unresolved(ctx, in.Limit)
		if err != nil {
			return unresolvedResult(UnresolvedOutput{Operations: []gateway.Answer{}, Status: gateway.StatusUnavailable, ErrorCode: "unavailable",
				NextAction: gateway.RetrySameIntent, RetryAfterMS: g.Config().PollAfter.Milliseconds(),
				Reason: "idemgate could not read the journal; calling list_unresolved again is safe."})
		}
		return unresolvedResult(UnresolvedOutput{Operations: list})
	})
}

// readArgs reads a read-only tool's arguments into dst (name → pointer to
// a string or a json.Number); bad says what is wrong, naming the argument.
func readArgs(raw json.RawMessage, dst map[string]any) (bad string) {
	args := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return "arguments must be a JSON object"
		}
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := args[name]
		switch p := dst[name].(type) {
		case nil:
			known := make([]string, 0, len(dst))
			for k := range dst {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Sprintf("%s: not an argument of this tool (it takes %s)", safeName(name), strings.Join(known, ", "))
		case *string:
			if string(v) != "null" && json.Unmarshal(v, p) != nil {
				return name + ": must be a string"
			}
		case *json.Number:
			if string(v) != "null" && (len(v) > 0 && v[0] == '"' || json.Unmarshal(v, p) != nil) {
				return name + ": must be a number"
			}
		}
	}
	return ""
}

// safeName is an unknown argument's name as an answer may quote it: a
// short word of the key alphabet, else nothing of it.
func safeName(name string) string {
	if len(name) > 64 || operation.ValidateID("argument", name) != nil {
		return "an argument"
	}
	return name
}

func rejectedArgs(bad string) gateway.Answer {
	return answer.Rejected("", "", string(operation.CodeInvalidField), bad)
}

func unresolvedFailure(a gateway.Answer) UnresolvedOutput {
	return UnresolvedOutput{Operations: []gateway.Answer{}, Status: a.Status, ErrorCode: a.ErrorCode, Reason: a.Reason,
		NextAction: a.NextAction, RetryAfterMS: a.RetryAfterMS}
}

// unresolvedResult is list_unresolved's answer as MCP returns it:
// structured content, the same JSON as text, isError when no list could
// be given.
func unresolvedResult(out UnresolvedOutput) (*sdk.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode answer: %w", err)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
		IsError:           out.Status != "",
	}, nil
}
