package main

import (
	"errors"
	"fmt"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/process/coordinator"
)

// processes compiles the declared processes (processes: in the file)
// against the operation types in reg: every step and compensation an
// existing type, every template naming a known input field or an earlier
// step. An error stops the daemon at start (exit 78).
func (c Config) processes(reg *operation.Registry) (*process.Set, error) {
	return process.CompileAll(c.Env, c.Processes, reg)
}

// buildCoordinator makes the process coordinator when processes are
// declared: the processes stream and its consumer, the definitions kept in
// the journal, and the check that no running process is stranded by this
// configuration (a definition that no longer compiles, an operation no
// route serves here: exit 78, naming the processes).
//
// With no process declared, the coordinator still runs while processes
// are running on definitions the journal keeps: they finish on them.
func (r *daemonRun) buildCoordinator() (startstop.Service, error) {
	c, d := r.c, r.d
	set, err := c.processes(r.opTypes)
	if err != nil {
		return nil, configError(err)
	}
	for _, def := range set.Definitions() {
		for _, op := range def.Uses() {
			if _, ok := r.routes[op]; !ok {
				r.log.Warn("a process sends an operation no route serves on this replica: its steps wait for a replica that has one",
					"process", def.Name, "operation", op)
			}
		}
	}
	running, err := coordinator.Prepare(r.ctx, d.store, set, r.opTypes, r.routed)
	if errors.Is(err, coordinator.ErrStranded) {
		return nil, configError(err)
	}
	if err != nil {
		return nil, fmt.Errorf("processes: %w", err)
	}
	if set.Len() == 0 && running == 0 {
		return nil, nil
	}
	pull, err := consumer.EnsureProcesses(r.ctx, r.js, c.NATS.Config)
	if err != nil {
		return nil, err
	}
	cfg := c.Coordinator
	cfg.Owner = d.worker.Owner() + ":coordinator"
	coord, err := coordinator.New(cfg, c.NATS.Config, coordinator.Deps{
		Store: d.store, JS: r.js, NC: r.nc, Consumer: pull, Processes: set, Registry: r.opTypes,
		ResultsStream: c.NATS.ResultsStream, Log: r.log.With("service", "coordinator"), Metrics: coordinator.NewMetrics(d.registry),
		AtBoundary: c.atBoundary,
	})
	if err != nil {
		return nil, configError(err)
	}
	d.coordinator = coord
	r.log.Info("processes", "declared", set.Len(), "running", running)
	return coord, nil
}

// routed reports whether an adapter serves op on this replica.
func (r *daemonRun) routed(op string) bool {
	_, ok := r.routes[op]
	return ok
}

// decodeCommand validates a command as the daemon will: an operation by
// the operation types, a process ("process.<name>") by its declaration.
func decodeCommand(c Config, reg *operation.Registry, cmd operation.Command) (operation.Operation, error) {
	if _, ok := process.IsProcess(cmd.Operation); ok {
		set, err := c.processes(reg)
		if err != nil {
			return operation.Operation{}, configError(err)
		}
		return set.DecodeCommand(cmd)
	}
	return (&operation.Decoder{Env: c.Env, Registry: reg}).DecodeCommand(cmd)
}
