package ingest

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr returns the address a request came from. It is the peer
// address unless the peer is one of trusted (a reverse proxy we run), in
// which case X-Forwarded-For is walked from the right, past further trusted
// proxies, to the first address no trusted proxy vouches for. An entry that
// does not parse ends the walk and is refused (ok false): whoever wrote it is
// not trusted to. With no trusted proxies X-Forwarded-For is never read.
func ClientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, ok := parsePeer(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !inPrefixes(peer, trusted) {
		return peer, true
	}
	values := r.Header.Values("X-Forwarded-For")
	if len(values) == 0 {
		return peer, true
	}
	hops := strings.Split(strings.Join(values, ","), ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return netip.Addr{}, false
		}
		client = a
		if !inPrefixes(a, trusted) {
			return a, true
		}
	}
	// Every hop is a trusted proxy: the leftmost is the origin.
	return client, true
}

func parsePeer(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
