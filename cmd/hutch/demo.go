package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/runtime"
)

// demoScript is what an agent's model might write: useful work in the
// workspace, then a write outside it and reads of secrets.
const demoScript = `echo "notes from the agent" > notes.txt && echo "wrote notes.txt in the workspace"
echo "owned" > /etc/hutch-demo 2>/dev/null && echo "WROTE /etc/hutch-demo" || echo "write to /etc/hutch-demo refused"
cat .env 2>/dev/null && echo "READ .env" || echo "read of the workspace .env refused"
ls "$HOST_SSH" 2>/dev/null && echo "LISTED $HOST_SSH" || echo "read of $HOST_SSH refused"
cat /etc/shadow >/dev/null 2>&1 && echo "READ /etc/shadow" || echo "read of /etc/shadow refused"
`

func demoCommand(code *int) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run an agent-style script in a scratch workspace and show what was refused",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := os.MkdirTemp("", "hutch-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(ws)
			if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("API_KEY=demo-secret\n"), 0o600); err != nil {
				return err
			}
			sb, err := runtime.New(runtime.DefaultPolicy(ws))
			if err != nil {
				return err
			}
			home, _ := os.UserHomeDir()
			fmt.Printf("workspace: %s\n$ sh -c <agent script>\n", ws)
			c := sb.Command(context.Background(), "sh", "-c", demoScript)
			c.Env = []string{"HOST_SSH=" + filepath.Join(home, ".ssh")}
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			// A non-zero exit is the script's verdict; anything else
			// (the sandbox could not be set up) is the demo's failure.
			var ee *runtime.ExitError
			if err := c.Run(); err != nil && !errors.As(err, &ee) {
				return err
			}
			// The verdicts that count are the host's own view.
			fmt.Println("--- checked on the host:")
			if _, err := os.Stat("/etc/hutch-demo"); err == nil {
				*code = 1
				fmt.Println("FAIL: /etc/hutch-demo exists on the host")
			} else {
				fmt.Println("ok: /etc/hutch-demo does not exist on the host")
			}
			if b, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err == nil {
				fmt.Printf("ok: the workspace holds notes.txt (%d bytes)\n", len(b))
			} else {
				*code = 1
				fmt.Println("FAIL: notes.txt is missing from the workspace")
			}
			fmt.Printf("layers enforced: %v\n", c.Result.Layers)
			return nil
		},
	}
}
