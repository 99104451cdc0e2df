package demo

import (
	"github.com/idemgate/idemgate/sandbox"
	sbbitrix24 "github.com/idemgate/idemgate/sandbox/bitrix24"
	sbonec "github.com/idemgate/idemgate/sandbox/onec"
	sbyookassa "github.com/idemgate/idemgate/sandbox/yookassa"
)

// Sandboxes are the emulators the demo's scenarios reach, each on a free
// loopback port.
type Sandboxes struct {
	YooKassa *sbyookassa.Server
	OneC     *sbonec.Server
	Bitrix24 *sbbitrix24.Server
}

// StartSandboxes starts the demo's emulators on free loopback ports. On
// error nothing is left running.
func StartSandboxes(opts sandbox.Options) (*Sandboxes, error) {
	s := &Sandboxes{
		YooKassa: sbyookassa.New(sbyookassa.Options{Options: opts}),
		OneC:     sbonec.New(sbonec.Options{Options: opts}),
		Bitrix24: sbbitrix24.New(sbbitrix24.Options{Options: opts}),
	}
	if err := s.Targets().Start(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// Targets returns the emulators in a fixed order.
func (s *Sandboxes) Targets() sandbox.Group {
	return sandbox.Group{s.YooKassa, s.OneC, s.Bitrix24}
}

// Close stops every emulator, all at once; safe twice.
func (s *Sandboxes) Close() error { return s.Targets().Close() }
