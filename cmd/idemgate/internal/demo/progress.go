package demo

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// progress prints what the demo is doing. On a terminal a waiting line is
// redrawn in place with a small spinner; otherwise every line is plain and
// final (logs, CI, pipes).
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	spin     int
	lineOpen bool // a spinner line is drawn and must be cleared first
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func newProgress(w io.Writer, tty bool) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{w: w, tty: tty}
}

// clear erases an open spinner line (terminal only). Callers hold mu.
func (p *progress) clear() {
	if p.lineOpen {
		fmt.Fprint(p.w, "\r\033[K")
		p.lineOpen = false
	}
}

// linef prints a finished line.
func (p *progress) linef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// scenario announces scenario i of n.
func (p *progress) scenario(i, n int, name, target string) {
	p.linef("\n[%d/%d] %s  (%s)", i, n, name, target)
}

// step tells one thing the scenario does.
func (p *progress) step(format string, args ...any) {
	p.linef("  · "+format, args...)
}

// waiting shows have of want results arrived; on a terminal it redraws one
// line, elsewhere it prints nothing (done prints the outcome).
func (p *progress) waiting(label string, have, want int) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spin = (p.spin + 1) % len(spinner)
	bar := progressBar(have, want, 20)
	fmt.Fprintf(p.w, "\r\033[K  %s %s %s %d/%d", spinner[p.spin], label, bar, have, want)
	p.lineOpen = true
}

// progressBar draws [#####.....] for have of want.
func progressBar(have, want, width int) string {
	if want <= 0 {
		return ""
	}
	n := min(max(have*width/want, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
