package darwin

import (
	"context"
	"os/exec"
)

// Command returns an exec.Cmd that runs name with args under p's profile.
func Command(ctx context.Context, p Policy, name string, args ...string) (*exec.Cmd, error) {
	prof, err := Compile(p, homeDir(), nil)
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, SandboxExec, prof.Args(name, args...)...), nil
}
