// The operation key and fingerprint, as the daemon derives them.

package main

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/idemgate/idemgate/operation"
)

// keyOf is the operation key the daemon derives from a command.
func keyOf(c *operation.Command) string {
	intent := c.IntentID
	if intent == "" {
		intent = c.EventID
	}
	return env + ":" + c.Operation + ":" + intent + ":" + operation.DefaultKeyVersion
}

func hashOf(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}
