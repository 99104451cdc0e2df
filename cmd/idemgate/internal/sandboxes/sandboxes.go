// Package sandboxes is the list of target emulators `idemgate sandbox`
// serves, and how a person reaches each: URL, contract, credentials and a
// configuration block for idemgate.
//
// The list is explicit, as the adapters' is (cmd/idemgate/adapterset.go):
// adding an emulator means adding it to All and to Describe, and nothing
// registers itself at init.
//
// Imports: sandbox and the six emulator packages; private to the binary.
package sandboxes

import (
	"github.com/idemgate/idemgate/sandbox"
	sbamocrm "github.com/idemgate/idemgate/sandbox/amocrm"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
	sbstripe "github.com/idemgate/idemgate/sandbox/stripe"
	sbtbank "github.com/idemgate/idemgate/sandbox/tbank"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// All builds every target emulator with the shared options, not started,
// in a fixed order.
func All(opts sandbox.Options) sandbox.Group {
	return sandbox.Group{
		sbonec.New(sbonec.Options{Options: opts}),
		sbbitrix24.New(sbbitrix24.Options{Options: opts}),
		sbamocrm.New(sbamocrm.Options{Options: opts}),
		sbyookassa.New(sbyookassa.Options{Options: opts}),
		sbtbank.New(sbtbank.Options{Options: opts}),
		sbstripe.New(sbstripe.Options{Options: opts}),
	}
}
