package main

import (
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
)

// processes compiles the declared processes (processes: in the file)
// against the operation types in reg: every step and compensation an
// existing type, every template naming a known input field or an earlier
// step. An error stops the daemon at start (exit 78).
func (c Config) processes(reg *operation.Registry) (*process.Set, error) {
	return process.CompileAll(c.Env, c.Processes, reg)
}
