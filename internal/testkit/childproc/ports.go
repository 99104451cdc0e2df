package childproc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// FreePort returns a loopback port nothing listens on right now, for a
// server that binds it later (a child process, or one restarted on the
// same port after a kill).
//
// Two things could take the port before the caller binds it, and neither
// can:
//   - a bind to port 0 or an outgoing connection elsewhere on the machine:
//     the port is drawn below the kernel's ephemeral range
//     (net.ipv4.ip_local_port_range), where the kernel never hands one out;
//   - another FreePort, in this process or in any other (a parallel test
//     package, a soak beside the tests): the port stays reserved to this
//     process for its life, on Linux by an abstract unix socket named after
//     it, which the kernel drops when the process ends.
//
// Where the ephemeral range leaves too little room below it, it falls back
// to asking the kernel for a port, which is not proof against the first.
func FreePort() (int, error) {
	lo := ephemeralLow()
	if lo-freePortMin >= 1000 {
		for range 256 {
			p := freePortMin + rand.IntN(lo-freePortMin)
			if !reserve(p) {
				continue
			}
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				_ = l.Close()
				return p, nil
			}
		}
	}
	for range 16 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if reserve(p) {
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port")
}

// freePortMin keeps FreePort above the ports of well-known services.
const freePortMin = 20000

// ephemeralLow is the first port of the kernel's ephemeral range, or
// freePortMin where it cannot be read (FreePort then asks the kernel).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return freePortMin
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return freePortMin
	}
	return lo
}

// reserved holds the ports FreePort handed out, each with its reservation
// (nil where the system has no abstract unix sockets), for the process's
// life: a port handed out once is never handed out again.
var reserved = struct {
	sync.Mutex
	ports map[int]net.Listener
}{ports: map[int]net.Listener{}}

// reserve claims port p for this process among every FreePort caller on
// the machine; false when another already holds it.
func reserve(p int) bool {
	reserved.Lock()
	defer reserved.Unlock()
	if _, ok := reserved.ports[p]; ok {
		return false
	}
	var l net.Listener
	if runtime.GOOS == "linux" {
		var err error
		// "@": the abstract namespace, no file; gone with the process.
		if l, err = net.Listen("unix", "@idemgate-childproc-port-"+strconv.Itoa(p)); err != nil {
			return false
		}
	}
	reserved.ports[p] = l
	return true
}

// RefusingAddr returns a loopback address that refuses connections, for a
// test of what a client meets when nothing listens: a socket is bound there
// without listening, so no server can take the port before release closes
// it.
func RefusingAddr() (addr string, release func(), err error) {
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return "", nil, fmt.Errorf("socket: %w", err)
	}
	// No SO_REUSEADDR: nothing else may bind the port while this socket
	// holds it, listening or not.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %T, want an IPv4 address", sa)
	}
	var once sync.Once
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port)), func() { once.Do(func() { _ = syscall.Close(fd) }) }, nil
}
