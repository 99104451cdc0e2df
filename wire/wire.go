package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Default stream names; the daemon's nats.commands_stream and
// nats.results_stream override them.
const (
	CommandsStream = "IDEMGATE_COMMANDS"
	ResultsStream  = "IDEMGATE_RESULTS"
	// ParkedStream holds the commands waiting for a person's approval.
	ParkedStream = "IDEMGATE_PARKED"
	// NotifyStream holds the approval requests to announce
	// (approvals.notify), one message per request.
	NotifyStream = "IDEMGATE_NOTIFY"
)

// Subjects. A command for operation type T is published on CommandPrefix+T,
// its result on ResultPrefix+T.
const (
	CommandPrefix = "idemgate.cmd."
	ResultPrefix  = "idemgate.res."
	// CommandSubjects and ResultSubjects are the streams' subject filters.
	CommandSubjects = CommandPrefix + ">"
	// ParkedPrefix + the hex SHA-256 of an operation key is where the
	// key's command waits for its approval (ParkedSubject).
	ParkedPrefix   = "idemgate.parked."
	ParkedSubjects = ParkedPrefix + ">"
	ResultSubjects = ResultPrefix + ">"
	// NotifySubject carries the approval requests to announce.
	NotifySubject = "idemgate.notify.approval"
	// RejectedSubject carries the rejected results of commands no operation
	// key could be derived for (not JSON, too large, no event id, unknown
	// operation, an intent id holding a card number or a secret). It is
	// inside ResultSubjects, and no operation can be named "_rejected"
	// (names start with a letter or digit), so it never mixes with a type's
	// results.
	RejectedSubject = ResultPrefix + "_rejected"
)

// Header names. Nats-Msg-Id is the server's deduplication header: a
// command's is its event id, a result's is ResultMsgID. Our own headers use
// the Idemgate- prefix (the Nats- prefix belongs to the server).
const (
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderReplyTo names a core NATS subject that also receives the result.
	HeaderReplyTo = "Idemgate-Reply-To"
	// HeaderOperationKey is set on results for subscribers that filter by key.
	HeaderOperationKey = "Idemgate-Operation-Key"
	// HeaderSource names the ingest source a command came from.
	HeaderSource = "Idemgate-Source"
	// HeaderFirstStored is set on a requeued command: when the stream first
	// stored it (RFC 3339), so that its age counts from then.
	HeaderFirstStored = "Idemgate-First-Stored"
	// HeaderRequeues counts how often a command was requeued.
	HeaderRequeues = "Idemgate-Requeues"
	// HeaderRequester names who submitted a command (an agent's token, a
	// face): a person approving it must be someone else.
	HeaderRequester = "Idemgate-Requester"
	// HeaderParkedSubject is set on a parked command: the subject it came
	// on, where its release publishes it again.
	HeaderParkedSubject = "Idemgate-Parked-Subject"
)

// RequeueMsgID is the Nats-Msg-Id of the copy that requeues the command
// stored at seq in stream: the same for every try of that requeue, so a
// copy whose PubAck was lost is not stored twice.
func RequeueMsgID(stream string, seq uint64) string {
	return "_requeue:" + stream + ":" + strconv.FormatUint(seq, 10)
}

// rejectedIDPrefix identifies a keyless rejected result by its command's
// stream sequence.
const rejectedIDPrefix = "_rejected:"

// CommandSubject is the subject of a command for an operation type; a
// process's command ("process.<name>") travels on ProcessSubject(name).
func CommandSubject(opType string) string {
	if name, ok := strings.CutPrefix(opType, ProcessOperationPrefix); ok {
		return ProcessSubject(name)
	}
	return CommandPrefix + opType
}

// ResultSubject is the subject of a result for an operation type; a result
// without one (a command rejected before its operation was known) goes to
// RejectedSubject.
func ResultSubject(opType string) string {
	if opType == "" {
		return RejectedSubject
	}
	return ResultPrefix + opType
}

// ResultSubjectFor is where a result is published: on its operation's
// subject, or on RejectedSubject when it has no operation key (a command
// rejected before a key could be derived).
func ResultSubjectFor(opType, key string) string {
	if key == "" {
		return RejectedSubject
	}
	return ResultSubject(opType)
}

// OperationFromSubject returns the operation type a command subject names
// ("process.<name>" for a process's subject).
func OperationFromSubject(subject string) (string, bool) {
	if name, ok := strings.CutPrefix(subject, ProcessPrefix); ok {
		return ProcessOperationPrefix + name, name != ""
	}
	op, ok := strings.CutPrefix(subject, CommandPrefix)
	return op, ok && op != ""
}

// ResultMsgID is the deduplication id of a result: <key>:<status>, so that
// the results stream keeps one result per operation and status however
// often a redelivery republishes it. A rejected result without a key is
// identified by its command's stream sequence, _rejected:<command_seq>, so
// that a redelivered command's rejection is published once; "" when neither
// is known.
func ResultMsgID(key, status string, commandSeq uint64) string {
	if key == "" {
		if commandSeq == 0 {
			return ""
		}
		return rejectedIDPrefix + strconv.FormatUint(commandSeq, 10)
	}
	return key + ":" + status
}

// Get reads header name from h (a nats.Header or an http.Header): the exact
// spelling first, then any other casing of it.
func Get(h map[string][]string, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0]
		}
	}
	return ""
}

// ParkedSubject is the subject of key's parked command: the key's hex
// SHA-256, since keys hold dots (subject separators).
func ParkedSubject(key string) string {
	sum := sha256.Sum256([]byte(key))
	return ParkedPrefix + hex.EncodeToString(sum[:])
}

// ReleaseMsgID is the Nats-Msg-Id of the command a decided approval hands
// back: one per key and decision, so that two replicas releasing at once
// store one copy.
func ReleaseMsgID(key, state string) string { return key + ":approval:" + state }
