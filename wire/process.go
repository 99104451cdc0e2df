package wire

// Business processes travel apart from operations: a process command is
// consumed by the process coordinator, not by the workers, and JetStream
// consumers select by subject inclusion only. So process commands have a
// subject tree and a stream of their own, and the workers' consumer
// (idemgate.cmd.>) never sees them:
//
//	idemgate.proc.<name>            a command of process <name> (operation "process.<name>")
//	idemgate.res.process.<name>     its results, in the results stream like every result
//
// Each step and compensation of a process is an ordinary command on
// idemgate.cmd.<operation>.
const (
	// ProcessesStream is the default name of the process commands'
	// stream; the daemon's nats.processes_stream overrides it.
	ProcessesStream = "IDEMGATE_PROCESSES"
	// ProcessPrefix begins a process command's subject.
	ProcessPrefix = "idemgate.proc."
	// ProcessSubjects is the processes stream's subject filter.
	ProcessSubjects = ProcessPrefix + ">"
	// ProcessOperationPrefix begins a process's operation name.
	ProcessOperationPrefix = "process."
)

// ProcessSubject is the subject of a command of the named process.
func ProcessSubject(name string) string { return ProcessPrefix + name }
