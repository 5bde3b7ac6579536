//go:build !linux

package runtime

// Denials returns the refusals recorded so far for a command that may
// still run. Only Linux records them as they happen: here none.
func (c *Cmd) Denials() (denials []Denial, dropped int) { return nil, 0 }
