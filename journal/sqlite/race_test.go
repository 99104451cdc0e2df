//go:build race

package sqlite

// raceEnabled reports a build with the race detector, which slows the
// transpiled SQLite by two orders of magnitude.
const raceEnabled = true
