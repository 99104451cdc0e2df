package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// Config describes the streams and the durable consumer. Zero fields take the
// defaults documented on each field (see WithDefaults).
type Config struct {
	// CommandsStream holds commands on idemgate.cmd.>. Default IDEMGATE_COMMANDS.
	CommandsStream string `mapstructure:"commands_stream"`
	// ResultsStream holds results on idemgate.res.>. Default IDEMGATE_RESULTS.
	ResultsStream string `mapstructure:"results_stream"`
	// Durable is the pull consumer shared by every replica. Default idemgate-worker.
	Durable string `mapstructure:"durable"`
	// ProcessesStream holds process commands on idemgate.proc.> (processes.go).
	// Default IDEMGATE_PROCESSES.
	ProcessesStream string `mapstructure:"processes_stream"`
	// ProcessDurable is the process coordinators' pull consumer, shared by
	// every replica. Default idemgate-process.
	ProcessDurable string `mapstructure:"process_durable"`
	// DuplicateWindow is the commands stream's Nats-Msg-Id window. Default 2m.
	DuplicateWindow time.Duration `mapstructure:"duplicate_window"`
	// AckWait is how long a delivery may stay unacknowledged before JetStream
	// redelivers it; heartbeats extend it while a call runs. Default 60s.
	AckWait time.Duration `mapstructure:"ack_wait"`
	// MaxDeliver bounds deliveries of one command. Default 20.
	MaxDeliver int `mapstructure:"max_deliver"`
	// MaxAckPending bounds unacknowledged deliveries across replicas. Default 20000.
	MaxAckPending int `mapstructure:"max_ack_pending"`
	// FetchBatch is how many commands one fetch asks for. Default 100.
	FetchBatch int `mapstructure:"fetch_batch"`
	// FetchWait is how long a fetch stays open for its batch to fill.
	// Default 500ms. Commands are handed on as they arrive, not when the
	// fetch ends: a group closes 2ms after its last command.
	FetchWait time.Duration `mapstructure:"fetch_wait"`
	// ResultsMaxAge is how long results are kept in their stream. Default 24h.
	ResultsMaxAge time.Duration `mapstructure:"results_max_age"`
	// CommandsMaxAge is how long commands are kept. Default 7 days.
	CommandsMaxAge time.Duration `mapstructure:"commands_max_age"`
	// Replicas is the stream replica count in a NATS cluster. Default 1.
	Replicas int `mapstructure:"replicas"`
	// MaxMsgSize is the largest command the stream accepts, in bytes. Default 1 MiB;
	// the decoder's own, smaller limit rejects oversized commands with a reason.
	MaxMsgSize int32 `mapstructure:"max_msg_size"`
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.CommandsStream, wire.CommandsStream)
	def(&c.ResultsStream, wire.ResultsStream)
	def(&c.Durable, "idemgate-worker")
	def(&c.ProcessesStream, wire.ProcessesStream)
	def(&c.ProcessDurable, "idemgate-process")
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.AckWait == 0 {
		c.AckWait = time.Minute
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 20
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 20000
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = 100
	}
	if c.FetchWait == 0 {
		c.FetchWait = 500 * time.Millisecond
	}
	if c.ResultsMaxAge == 0 {
		c.ResultsMaxAge = 24 * time.Hour
	}
	if c.CommandsMaxAge == 0 {
		c.CommandsMaxAge = 7 * 24 * time.Hour
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = 1 << 20
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	for name, v := range map[string]string{"commands_stream": c.CommandsStream, "results_stream": c.ResultsStream, "durable": c.Durable,
		"processes_stream": c.ProcessesStream, "process_durable": c.ProcessDurable} {
		if v == "" || strings.ContainsAny(v, ".*> \t") {
			errs = append(errs, fmt.Errorf("nats.%s %q: must be non-empty without '.', '*', '>' or spaces", name, v))
		}
	}
	if c.CommandsStream == c.ResultsStream || c.ProcessesStream == c.CommandsStream || c.ProcessesStream == c.ResultsStream {
		errs = append(errs, errors.New("nats.commands_stream, nats.results_stream and nats.processes_stream must differ"))
	}
	if c.DuplicateWindow < time.Second {
		errs = append(errs, fmt.Errorf("nats.duplicate_window %v: at least 1s", c.DuplicateWindow))
	}
	if c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("nats.ack_wait %v: at least 1s", c.AckWait))
	}
	if c.MaxDeliver < 2 {
		errs = append(errs, fmt.Errorf("nats.max_deliver %d: at least 2", c.MaxDeliver))
	}
	if c.FetchBatch < 1 || c.FetchBatch > 1000 {
		errs = append(errs, fmt.Errorf("nats.fetch_batch %d: between 1 and 1000", c.FetchBatch))
	}
	if c.MaxAckPending < c.FetchBatch {
		errs = append(errs, fmt.Errorf("nats.max_ack_pending %d: at least fetch_batch (%d)", c.MaxAckPending, c.FetchBatch))
	}
	if c.FetchWait <= 0 {
		errs = append(errs, fmt.Errorf("nats.fetch_wait %v: must be positive", c.FetchWait))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("nats.replicas %d: between 1 and 5", c.Replicas))
	}
	return errors.Join(errs...)
}

// CommandsStreamConfig is the commands stream's definition.
func (c Config) CommandsStreamConfig() jetstream.StreamConfig {
	return c.streamConfig(c.CommandsStream, "idemgate commands: one business intent per Nats-Msg-Id", wire.CommandSubjects,
		c.CommandsMaxAge, c.DuplicateWindow, c.MaxMsgSize)
}

// ResultsStreamConfig is the results stream's definition. Its MaxMsgSize is
// -1, the server's "unlimited", stated so Ensure finds it equal.
func (c Config) ResultsStreamConfig() jetstream.StreamConfig {
	return c.streamConfig(c.ResultsStream, "idemgate results: one per operation key and status", wire.ResultSubjects,
		c.ResultsMaxAge, min(c.DuplicateWindow, c.ResultsMaxAge), -1)
}

// streamConfig is what both streams share: file storage, limits retention
// that drops the oldest messages, and c's replica count.
func (c Config) streamConfig(name, description, subjects string, maxAge, duplicates time.Duration, maxMsgSize int32) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    []string{subjects},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      maxAge,
		Duplicates:  duplicates,
		Replicas:    c.Replicas,
		MaxMsgSize:  maxMsgSize,
		Discard:     jetstream.DiscardOld,
	}
}

// ConsumerConfig is the durable pull consumer's definition.
func (c Config) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       c.Durable,
		Description:   "idemgate workers (shared by all replicas)",
		FilterSubject: wire.CommandSubjects,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    c.MaxDeliver,
		MaxAckPending: c.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		Replicas:      c.Replicas,
	}
}

// Ensure creates or updates both streams and the durable consumer, and
// returns the consumer. Every replica may call it at start-up.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Consumer, error) {
	if err := ensureStream(ctx, js, c.CommandsStreamConfig()); err != nil {
		return nil, fmt.Errorf("commands stream %s: %w", c.CommandsStream, err)
	}
	if err := ensureStream(ctx, js, c.ResultsStreamConfig()); err != nil {
		return nil, fmt.Errorf("results stream %s: %w", c.ResultsStream, err)
	}
	want := c.ConsumerConfig()
	if cons, err := js.Consumer(ctx, c.CommandsStream, c.Durable); err == nil && sameConsumer(cons.CachedInfo().Config, want) {
		return cons, nil
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, c.CommandsStream, want)
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", c.Durable, c.CommandsStream, err)
	}
	return cons, nil
}

// ensureStream creates a missing stream and updates one whose settings
// differ (except its replica count: see ReplicasMismatchError), but leaves
// an equal one alone: replicas start together, and a
// needless update racing another replica's consumer creation is work (and,
// in nats-server 2.15, a data race) for nothing.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another replica created it meanwhile.
			st, err = js.Stream(ctx, want.Name)
		} else {
			return err
		}
	}
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	if sameStream(have, want) {
		return nil
	}
	if have.Replicas != want.Replicas {
		return &ReplicasMismatchError{Stream: want.Name, Have: have.Replicas, Want: want.Replicas}
	}
	_, err = js.UpdateStream(ctx, want)
	return err
}

// sameStream compares the settings idemgate chooses.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.MaxAge == want.MaxAge &&
		have.Duplicates == want.Duplicates && have.Replicas == want.Replicas &&
		have.MaxMsgSize == want.MaxMsgSize && have.Storage == want.Storage &&
		have.Retention == want.Retention && have.Discard == want.Discard && have.Description == want.Description
}

// sameConsumer compares the consumer settings idemgate chooses.
func sameConsumer(have, want jetstream.ConsumerConfig) bool {
	return have.FilterSubject == want.FilterSubject && have.AckPolicy == want.AckPolicy &&
		have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
		have.MaxAckPending == want.MaxAckPending && have.DeliverPolicy == want.DeliverPolicy &&
		have.Description == want.Description
}

// ResultMsg builds the message that publishes r: on idemgate.res.<operation>,
// or on wire.RejectedSubject when r has no operation key, with the
// Nats-Msg-Id of wire.ResultMsgID.
func ResultMsg(r operation.Result) (*nats.Msg, error) {
	// json.Marshal's bytes without its reflection (operation.Result.AppendJSON).
	body, err := r.AppendJSON(make([]byte, 0, 192+len(r.OperationKey)+len(r.EventID)+len(r.Result)))
	if err != nil {
		return nil, fmt.Errorf("encode result %s: %w", r.OperationKey, err)
	}
	m := nats.NewMsg(wire.ResultSubjectFor(r.Operation, r.OperationKey))
	m.Data = body
	if id := wire.ResultMsgID(r.OperationKey, string(r.Status), r.CommandSeq); id != "" {
		m.Header.Set(wire.HeaderMsgID, id)
	}
	if r.OperationKey != "" {
		m.Header.Set(wire.HeaderOperationKey, r.OperationKey)
	}
	return m, nil
}
