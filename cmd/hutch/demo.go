package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/runtime"
)

// The demo plants what it claims to protect, runs a script such as a
// model might write against all of it, and then judges every claim on
// the host: files that exist or not, secrets that did or did not reach
// the command's output, a host listener that saw a connection or not, a
// host process that still runs or not. Nothing the script prints is
// taken as a verdict. Each refusal is told with the rule of the policy
// that made it.

// demoClaim is one thing the demo says, judged on the host after the
// script has run.
type demoClaim struct {
	what string
	// check returns whether the claim held, and what was seen.
	check func() (bool, string)
	// rule says which part of the policy made it so.
	rule string
}

func demoCommand(code *int) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run an agent-style script against planted secrets and check on the host what it could do",
		Long: `demo makes a scratch workspace and home, plants secrets in them (a .env
in the workspace, ~/.ssh and ~/.aws keys in the home, each with a token made for
this run), starts a listener on the host's loopback and a host process, and runs,
on the embedded default policy, a script such as a model might write: a write in
the workspace, a write to /etc, reads of every secret, a connection to the
listener, a kill of the host process. Then it checks each claim on the host and
says, for each refusal, the rule that made it. It exits 1 if any claim failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ok, err := runDemo(cmd.Context(), cmd.OutOrStdout())
			if err == nil && !ok {
				*code = 1
			}
			return err
		},
	}
}

func runDemo(ctx context.Context, out io.Writer) (bool, error) {
	scratch, err := os.MkdirTemp("", "hutch-demo-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(scratch)
	ws, home := filepath.Join(scratch, "workspace"), filepath.Join(scratch, "home")
	token := func() string {
		b := make([]byte, 12)
		rand.Read(b)
		return "hutch-demo-" + hex.EncodeToString(b)
	}
	secrets := []struct{ path, token string }{
		{filepath.Join(ws, ".env"), token()},
		{filepath.Join(home, ".ssh", "id_ed25519"), token()},
		{filepath.Join(home, ".aws", "credentials"), token()},
	}
	for _, s := range secrets {
		if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
			return false, err
		}
		if err := os.WriteFile(s.path, []byte("SECRET="+s.token+"\n"), 0o600); err != nil {
			return false, err
		}
	}
	// The policy's "~" is this home: the demo touches nothing of the
	// user's own.
	os.Setenv("HOME", home)
	policy := runtime.DefaultPolicy(ws)
	sb, err := runtime.New(policy)
	if err != nil {
		return false, err
	}
	defer sb.Close()

	// A listener on the host's loopback, counting what reaches it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	defer ln.Close()
	var connections atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// The control: the listener counts a connection from the host.
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); connections.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if connections.Swap(0) != 1 {
		return false, errors.New("demo: the host's own connection to its listener was not counted")
	}
	// A process of the host's, for the script to try to kill.
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		return false, err
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	etcFile := "/etc/" + filepath.Base(scratch)

	connect, connectTool := demoConnect(port)
	script := strings.Join([]string{
		`echo "notes from the agent" > notes.txt`,
		`{ echo owned > ` + etcFile + `; } 2>/dev/null`,
		`cat .env ~/.ssh/id_ed25519 ~/.aws/credentials 2>/dev/null`,
		connect,
		fmt.Sprintf(`kill -9 %d 2>/dev/null`, victim.Process.Pid),
		`true`,
	}, "\n")
	fmt.Fprintf(out, "scratch workspace %s and home %s (HOME for this run), secrets planted in\n", ws, home)
	for _, s := range secrets {
		fmt.Fprintf(out, "  %s\n", s.path)
	}
	fmt.Fprintf(out, "a host listener on 127.0.0.1:%d, a host process %d (sleep)\n$ sh -c '\n%s'\n", port, victim.Process.Pid, script)

	var output bytes.Buffer
	c := sb.Command(ctx, "sh", "-c", script)
	c.Env = []string{"HOME=" + home}
	c.Stdout = io.MultiWriter(out, &output)
	c.Stderr = io.MultiWriter(out, &output)
	// A non-zero exit is the script's own; anything else (the sandbox
	// could not be set up) is the demo's failure.
	var ee *runtime.ExitError
	if err := c.Run(); err != nil && !errors.As(err, &ee) {
		return false, err
	}

	claims := []demoClaim{{
		what: "the agent's write in the workspace is there",
		check: func() (bool, string) {
			b, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
			return err == nil && string(b) == "notes from the agent\n", fmt.Sprintf("%s: %q", filepath.Join(ws, "notes.txt"), b)
		},
		rule: "allowed: the workspace is writable",
	}, {
		what: "the write to /etc did not happen",
		check: func() (bool, string) {
			_, err := os.Lstat(etcFile)
			return errors.Is(err, os.ErrNotExist), etcFile + " does not exist"
		},
		rule: "/etc is not among the writable trees (" + strings.Join(writableTrees(policy), ", ") + "): the view is read-only there",
	}}
	for _, s := range secrets {
		claims = append(claims, demoClaim{
			what: "the secret in " + s.path + " did not reach the command's output",
			check: func() (bool, string) {
				host, err := os.ReadFile(s.path)
				if err != nil || !bytes.Contains(host, []byte(s.token)) {
					return false, "the host cannot read the planted secret back: nothing was shown"
				}
				return !bytes.Contains(output.Bytes(), []byte(s.token)), "its token is readable on the host and absent from the output"
			},
			rule: denyRule(s.path, ws, home),
		})
	}
	claims = append(claims, demoClaim{
		what: "no connection reached the host's listener",
		check: func() (bool, string) {
			if connectTool == "" {
				return false, "not tried: no curl, wget, python3 or bash on this host to try it with"
			}
			time.Sleep(100 * time.Millisecond) // a connection in flight is counted
			n := connections.Load()
			return n == 0, fmt.Sprintf("tried with %s; the listener accepted %d", connectTool, n)
		},
		rule: "network " + string(policy.Network) + ": the command's network namespace has only a loopback of its own",
	}, demoClaim{
		what: fmt.Sprintf("the host process %d survived the script's kill -9", victim.Process.Pid),
		check: func() (bool, string) {
			err := victim.Process.Signal(syscall.Signal(0))
			return err == nil, fmt.Sprintf("signal 0 to it: %v", err)
		},
		rule: "the command's pid namespace holds only its own processes",
	})

	fmt.Fprintln(out, "--- each claim, checked on the host:")
	all := true
	for _, cl := range claims {
		held, seen := cl.check()
		verdict := "ok  "
		if !held {
			verdict, all = "FAIL", false
		}
		fmt.Fprintf(out, "%s %s (%s)\n     why: %s\n", verdict, cl.what, seen, cl.rule)
	}
	if c.Result != nil {
		fmt.Fprintf(out, "level %s, layers enforced: %v\n", c.Result.Level, c.Result.Layers)
	}
	return all, nil
}

// demoConnect is a shell line that connects to the host's loopback port
// with a tool this host has (the sandbox sees the host's binaries), and
// the tool's name; none, "".
func demoConnect(port int) (string, string) {
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for _, tool := range []struct{ name, line string }{
		{"curl", "curl -s -m 2 " + url},
		{"wget", "wget -q -T 2 -O /dev/null " + url},
		{"python3", fmt.Sprintf(`python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), 2)'`, port)},
		{"bash", fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d'`, port)},
	} {
		if _, err := exec.LookPath(tool.name); err == nil {
			return tool.line + " >/dev/null 2>&1", tool.name
		}
	}
	return "", ""
}

// writableTrees names the trees a command of policy may write.
func writableTrees(p runtime.Policy) []string {
	return append([]string{p.Workspace + " (the workspace)", "/tmp (the command's own)"}, p.Writable...)
}

// denyRule says which of the default policy's masks covers path.
func denyRule(path, ws, home string) string {
	if rel, err := filepath.Rel(ws, path); err == nil && !strings.HasPrefix(rel, "..") {
		if name := filepath.Base(path); slices.Contains(runtime.DefaultDenyNames(), name) {
			return fmt.Sprintf("masked: %q is one of the default deny names, masked in the workspace and the writable trees", name)
		}
	}
	for _, d := range runtime.DefaultDeny() {
		host := d
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			host = filepath.Join(home, rest)
		}
		if path == host || strings.HasPrefix(path, host+"/") {
			return fmt.Sprintf("masked: %q is on the default deny-list", d)
		}
	}
	return "(no rule of the default policy masks it)"
}
