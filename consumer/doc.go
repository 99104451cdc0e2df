// Package consumer defines idemgate's JetStream surface: the commands and
// results streams, the durable pull consumer shared by every replica, the
// subjects and headers, and the result message format.
//
// It imports operation.
package consumer
