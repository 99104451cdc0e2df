package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/testkit/daemontest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// TestSubmitMasksFreeTextInTheCommandsStream: the faces (HTTP API, MCP)
// publish the command as decoded, its free text masked by the rule ingest
// applies to webhook text: the commands stream holds the card's first six
// and last four digits and no key, and the fingerprint is the request's.
// A card number or a key in any other string field is refused, naming the
// field, before anything is published.
func TestSubmitMasksFreeTextInTheCommandsStream(t *testing.T) {
	d := daemontest.Start(t, daemontest.SQLite)
	reg, err := operation.RegistryWith(map[string]operation.TypeDecl{"note.create": {
		TargetSystem: "notes",
		Fields: []operation.FieldDecl{
			{Name: "ref", Kind: "string", Required: true},
			{Name: "comment", Kind: "string", FreeText: true},
		},
	}})
	require.NoError(t, err)
	// The daemon serves no such type: it answers rejected, which is all this
	// test needs — what matters is what the gateway put into the stream.
	g, err := gateway.New(gateway.Config{Env: daemontest.Env, Wait: 5 * time.Second},
		gateway.Deps{NC: d.NC, Journal: d.Journal, Registry: reg})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	ctx := context.Background()

	const card, key = "4111 1111 1111 1111", "sk_live_4eC39HqLyjWDarjtT1"
	payload := json.RawMessage(`{"ref":"n-1","comment":"customer read out ` + card + ` and ` + key + `"}`)
	g.Submit(ctx, gateway.Request{Operation: "note.create", IntentID: "note-1", Payload: payload})

	stream, err := d.JS.Stream(ctx, d.Consumer.CommandsStream)
	require.NoError(t, err)
	msg, err := stream.GetLastMsgForSubject(ctx, wire.CommandSubject("note.create"))
	require.NoError(t, err)
	require.NotContains(t, string(msg.Data), card)
	require.NotContains(t, string(msg.Data), "4111111111111111")
	require.NotContains(t, string(msg.Data), "sk_live_")
	var cmd operation.Command
	require.NoError(t, json.Unmarshal(msg.Data, &cmd))
	var published map[string]any
	require.NoError(t, json.Unmarshal(cmd.Payload, &published))
	require.Equal(t, "customer read out 4111 11** **** 1111 and [REDACTED]", published["comment"])
	require.Equal(t, "n-1", published["ref"])
	dec := &operation.Decoder{Env: daemontest.Env, Registry: reg}
	sent, err := dec.DecodeCommand(operation.Command{EventID: "note-1", Operation: "note.create", IntentID: "note-1", Payload: payload})
	require.NoError(t, err)
	got, err := dec.Decode(msg.Data)
	require.NoError(t, err)
	require.Equal(t, sent.Fingerprint, got.Fingerprint, "the same intent")
	require.Equal(t, "test:note.create:note-1:v1", got.Key.String())

	for name, p := range map[string]string{
		"card in ref": `{"ref":"` + card + `"}`,
		"key in ref":  `{"ref":"` + key + `"}`,
	} {
		a := g.Submit(ctx, gateway.Request{Operation: "note.create", IntentID: "note-2", Payload: json.RawMessage(p)})
		require.Equal(t, gateway.StatusRejected, a.Status, name)
		require.Equal(t, gateway.FixInput, a.NextAction, name)
		require.Contains(t, a.Reason, "payload.ref: contains a ", name)
		require.NotContains(t, a.Reason, "4111", name)
		require.NotContains(t, a.Reason, "4eC39HqLyjWDarjtT1", name)
	}
	_, err = stream.GetMsg(ctx, msg.Sequence+1)
	require.Error(t, err, "a refused command is never published")
}
