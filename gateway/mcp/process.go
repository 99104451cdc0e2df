package mcp

import (
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/process"
)

// addProcessTools adds one tool per declared process: its input schema is
// the process's input (intent_id bounded by what the steps' keys leave),
// its answer the process's state — each step's status, key and object in
// result — read again with get_operation and the process's key.
func addProcessTools(srv *sdk.Server, g *gateway.Gateway, out *jsonschema.Schema, opts Options) error {
	for _, def := range g.Processes() {
		in, err := InputSchema(g.Env(), def.Input)
		if err != nil {
			return err
		}
		in.Properties[argIntentID].MaxLength = ptr(def.MaxIntentLen(g.Env()))
		moneyMoves := def.Input.RequiresApproval
		tool := &sdk.Tool{
			Name: ToolName(def.Operation), Title: "Process " + def.Name, Description: processDescription(def),
			InputSchema: in, OutputSchema: out,
			Annotations: &sdk.ToolAnnotations{
				Title: "Process " + def.Name, IdempotentHint: true, DestructiveHint: ptr(moneyMoves), OpenWorldHint: ptr(true),
			},
		}
		srv.AddTool(tool, operationHandler(g, def.Input, opts))
	}
	return nil
}

// processDescription tells a model what the process does, step by step,
// and how its answers read.
func processDescription(def *process.Definition) string {
	var steps []string
	for i, s := range def.Steps {
		step := fmt.Sprintf("%d. %s (%s)", i+1, s.Name, s.Action.Operation)
		if s.Compensation != nil {
			step += ", undone by " + s.Compensation.Operation
		}
		steps = append(steps, step)
	}
	money := ""
	if def.Input.RequiresApproval {
		money = " Moves money: a step may wait for a person's approval (its state says await_approval); keep polling, never start the process again with a new intent_id."
	}
	return fmt.Sprintf("Run the business process %s: %s. Steps run in order, each made at most once; "+
		"if a step is refused for good, the steps before it are compensated newest first (a cancelling document, a refund), never deleted. "+
		"One intent_id per business intent, reused on every retry: calling again is answered with the process's state, never a second run.%s "+
		"A process takes its steps' time: poll with get_operation and the operation_key the answer gives; "+
		"result holds the process's state (process_status: running, succeeded, compensating, compensated, needs_review) and each step's status, key and object. ",
		def.Name, strings.Join(steps, "; "), money) + nextActionHelp
}
