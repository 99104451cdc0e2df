package process

import (
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/operation"
)

// StepKeyVersion is the version part of every step's and compensation's
// key: the process's own key carries the intent's version.
const StepKeyVersion = operation.DefaultKeyVersion

// compensateSuffix ends a compensation's intent.
const compensateSuffix = ":compensate"

// StepKey is the key of a step (compensate false) or of its compensation:
// <env>:<operation>:<process key without env>:<step>[:compensate]:v1. A
// retried, copied or resumed process reaches the same keys, so the journal
// answers every step it already ran. opType is the step's (or the
// compensation's) operation type.
func StepKey(process operation.Key, opType, step string, compensate bool) (operation.Key, error) {
	intent := process.Operation + ":" + process.IntentID + ":" + process.Version + ":" + step
	if compensate {
		intent += compensateSuffix
	}
	k := operation.Key{Env: process.Env, Operation: opType, IntentID: intent, Version: StepKeyVersion}
	if err := operation.ValidateKey(k.String()); err != nil {
		return operation.Key{}, fmt.Errorf("step %s of %s: %w", step, process, err)
	}
	return k, nil
}

// Keys are the keys of a process's steps and compensations, by step index.
type Keys struct {
	Steps         []operation.Key
	Compensations []operation.Key // zero Key for a step without one
}

// KeysOf derives every step and compensation key of the process with key
// k. An error (a key past 255 bytes, for a long intent) names the step.
func (d *Definition) KeysOf(k operation.Key) (Keys, error) {
	out := Keys{Steps: make([]operation.Key, len(d.Steps)), Compensations: make([]operation.Key, len(d.Steps))}
	for i, s := range d.Steps {
		sk, err := StepKey(k, s.Action.Operation, s.Name, false)
		if err != nil {
			return Keys{}, err
		}
		out.Steps[i] = sk
		if s.Compensation != nil {
			ck, err := StepKey(k, s.Compensation.Operation, s.Name, true)
			if err != nil {
				return Keys{}, err
			}
			out.Compensations[i] = ck
		}
	}
	return out, nil
}

// MaxIntentLen is the longest intent id a command of the process may carry
// under env with key version v1: its longest step key must fit in
// operation.MaxKeyLen.
func (d *Definition) MaxIntentLen(env string) int {
	limit := operation.MaxIntentLen(env, d.Operation, operation.DefaultKeyVersion)
	for _, s := range d.Steps {
		for _, a := range []*Action{&s.Action, s.Compensation} {
			if a == nil {
				continue
			}
			// <env>:<op>:<process op>:<intent>:v1:<step>[:compensate]:v1
			fixed := len(env) + len(a.Operation) + len(d.Operation) + len(operation.DefaultKeyVersion) + len(s.Name) + len(StepKeyVersion) + 6
			if a == s.Compensation {
				fixed += len(compensateSuffix)
			}
			limit = min(limit, operation.MaxKeyLen-fixed)
		}
	}
	return limit
}

// IsProcess reports whether an operation name is a process's, and returns
// the process's name.
func IsProcess(opName string) (name string, ok bool) {
	return strings.CutPrefix(opName, OperationPrefix)
}
