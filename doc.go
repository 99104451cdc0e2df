// Package idemgate holds the repository-wide tests (dependency direction).
// The daemon is cmd/idemgate; see README.md.
//
// Its tests import the standard library only (they read `go list`).
package idemgate
