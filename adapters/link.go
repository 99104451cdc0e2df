package adapters

// ObjectLinker is implemented by adapters that know where an operator sees
// an object in the target's own interface (the operator's console links
// to it). Optional: an adapter without it shows no link.
type ObjectLinker interface {
	// ObjectURL is the page of the object an operation of type
	// operationType created, or "" when the adapter knows none.
	ObjectURL(operationType, objectID string) string
}

// digits reports whether s is a non-empty run of ASCII digits: the ids
// that CRM pages take in their paths.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// NumericObjectURL is base + path + id + suffix when id is numeric, else "".
func NumericObjectURL(base, path, id, suffix string) string {
	if base == "" || !digits(id) {
		return ""
	}
	return base + path + id + suffix
}
