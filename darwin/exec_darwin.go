package darwin

import (
	"context"
	"os/exec"
)

// Command returns an exec.Cmd that runs name with args under p's profile
// through /usr/bin/sandbox-exec.
func Command(ctx context.Context, p Policy, name string, args ...string) (*exec.Cmd, error) {
	prof, err := Compile(p)
	if err != nil {
		return nil, err
	}
	return prof.Command(ctx, name, args...), nil
}

// Command returns an exec.Cmd that runs name with args under the profile
// through /usr/bin/sandbox-exec.
func (p Profile) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, SandboxExec, p.Args(name, args...)...)
}
