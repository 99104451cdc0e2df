// Package idemgate holds the repository-wide tests (dependency direction).
// The daemon is cmd/idemgate; see README.md.
package idemgate
