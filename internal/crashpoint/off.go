//go:build !soak

package crashpoint

// Enabled reports whether this build reads the soak switches (-tags soak).
const Enabled = false

func hit(Point) {}

func broken(Break) bool { return false }
