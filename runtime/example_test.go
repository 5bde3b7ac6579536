//go:build linux

package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// Importing the package is the whole integration: the host binary becomes
// its own sandbox init, because hutch re-executes it through
// /proc/self/exe and the package's init function takes that process over
// before main runs. No line in main is needed (this test binary has none).
func Example() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)

	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := sb.Command(context.Background(), "sh", "-c",
		"echo hello from the sandbox > greeting.txt; cat greeting.txt").Output()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))

	// The workspace is the host's own directory: the file is there.
	b, _ := os.ReadFile(ws + "/greeting.txt")
	fmt.Print("on the host: ", string(b))
	// Output:
	// hello from the sandbox
	// on the host: hello from the sandbox
}

// After Run, Cmd.Result holds the exit status and the isolation layers
// that were enforced; a command that did not exit 0 returns an
// *ExitError carrying the same Result.
func ExampleCmd_Run() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		fmt.Println(err)
		return
	}

	cmd := sb.Command(context.Background(), "sh", "-c", "exit 3")
	err = cmd.Run()
	var ee *runtime.ExitError
	if errors.As(err, &ee) {
		fmt.Println("exit code:", ee.ExitCode)
		fmt.Println("error:", err)
	}
	for _, l := range []runtime.Layer{runtime.LayerUserNS, runtime.LayerNetNS, runtime.LayerFilesystem, runtime.LayerCapabilities} {
		fmt.Printf("%s enforced: %v\n", l, slices.Contains(cmd.Result.Layers, l))
	}
	// Output:
	// exit code: 3
	// error: exit status 3
	// user-namespace enforced: true
	// network-namespace enforced: true
	// filesystem enforced: true
	// capabilities enforced: true
}

// Policy.Timeout ends a command, and everything it started, after a
// while: SIGTERM first (which ends sleep), SIGKILL for the whole sandbox
// after Cmd.WaitDelay. The timeout counts from Start, so on a loaded host
// it may land while the sandbox is still being built, and the command is
// then killed before it runs (SIGKILL): either way the error matches
// ErrTimeout and Result says that hutch killed it and why.
func ExamplePolicy_timeout() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	p := runtime.DefaultPolicy(ws)
	p.Timeout = 100 * time.Millisecond
	sb, err := runtime.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}

	cmd := sb.Command(context.Background(), "sleep", "60")
	err = cmd.Run()
	fmt.Println("timed out:", errors.Is(err, runtime.ErrTimeout))
	fmt.Println("killed:", cmd.Result.Killed, "reason:", cmd.Result.KillReason)
	// Output:
	// timed out: true
	// killed: true reason: timeout
}

// Bad input is refused before any process starts, with the field at fault.
func ExamplePolicyError() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		fmt.Println(err)
		return
	}

	cmd := sb.Command(context.Background(), "python3", "script.py")
	cmd.Env = []string{"PYTHONPATH=/tmp/evil"}
	err = cmd.Run()
	var pe *runtime.PolicyError
	if errors.As(err, &pe) {
		fmt.Println(pe.Field)
		fmt.Println(err)
	}
	// Output:
	// Cmd.Env[PYTHONPATH]
	// hutch: Cmd.Env[PYTHONPATH]: may not be set: the interpreter loads code it names at startup
}

// An agent's file tools use the same boundary as its commands, without
// starting one: ReadFile and WriteFile see what a command of the Sandbox
// would, and refuse what it could not read or write.
func ExampleSandbox_ReadFile() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	os.WriteFile(ws+"/.env", []byte("API_KEY=secret\n"), 0o600)
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	if _, err := sb.WriteFile(ws+"/notes/todo.txt", []byte("ship it\n"), runtime.WriteOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	c, err := sb.ReadFile("notes/todo.txt", runtime.ReadOptions{}) // relative to the workspace
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %q\n", c.Kind, c.Data)

	_, err = sb.ReadFile(".env", runtime.ReadOptions{}) // masked, as for commands
	fmt.Println(errors.Is(err, runtime.ErrDenied))
	_, err = sb.WriteFile("/etc/motd", []byte("hi"), runtime.WriteOptions{}) // read-only for commands
	fmt.Println(errors.Is(err, fs.ErrPermission))
	// Output:
	// text: "ship it\n"
	// true
	// true
}

// Check decides what New would, and starts nothing: a policy can be
// validated, or shown resolved, without paying for a Sandbox.
func ExampleCheck() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)

	p := runtime.DefaultPolicy(ws)
	p.Writable = []string{"build"} // relative to the workspace, and missing
	_, err = runtime.Check(p)
	var pe *runtime.PolicyError
	if errors.As(err, &pe) {
		fmt.Println(pe.Field)
	}

	if err := os.Mkdir(ws+"/build", 0o755); err != nil {
		fmt.Println(err)
		return
	}
	r, err := runtime.Check(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Policy().Writable[0] == ws+"/build")
	// Output:
	// Writable[0]
	// true
}

// A Sandbox's commands get nothing beyond its policy unless they ask
// (Cmd.Grant), and may ask only for what Policy.Grantable covers. Narrow
// hands a sub-agent a Sandbox whose ceiling is a part of its parent's:
// permissions only shrink on the way down.
func ExampleSandbox_Narrow() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	out, err := os.MkdirTemp("", "hutch-example-out-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(out)

	p := runtime.DefaultPolicy(ws)
	p.Grantable, _ = runtime.ParseGrant([]string{"write:" + out, "domain:example.com"})
	sb, err := runtime.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	written := func() bool { _, err := os.Stat(out + "/a"); return err == nil }
	// Without asking, the tree outside the workspace is read-only.
	sb.Command(context.Background(), "sh", "-c", "echo x > "+out+"/a").Run()
	fmt.Println("written without a grant:", written())
	// Asking for what the ceiling covers.
	c := sb.Command(context.Background(), "sh", "-c", "echo x > "+out+"/a")
	c.Grant, _ = runtime.ParseGrant([]string{"write:" + out})
	fmt.Println("with its grant:", c.Run(), written())

	// The sub-agent's ceiling is the network to example.com alone.
	sub, err := sb.Narrow(runtime.Grant{Network: true, Domains: []string{"example.com"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	c = sub.Command(context.Background(), "true")
	c.Grant, _ = runtime.ParseGrant([]string{"write:" + out})
	var perm *runtime.PermissionError
	fmt.Println("the sub-agent asks for the write:", errors.As(c.Run(), &perm))
	// Output:
	// written without a grant: false
	// with its grant: <nil> true
	// the sub-agent asks for the write: true
}

// A listed view shows a command the system trees, its workspace and what
// the policy lists, nothing else of the host: another checkout beside the
// workspace is not there at all. A bind shows a host tree where the agent
// expects it.
func ExamplePolicy_listed() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(ws)
	other, err := os.MkdirTemp("", "hutch-example-checkout-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(other)
	if err := os.WriteFile(other+"/notes.txt", []byte("from the host\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}

	p := runtime.DefaultPolicy(ws)
	p.Reads = runtime.ReadsListed
	p.Binds = []runtime.Bind{{Host: other, Path: "/data", ReadOnly: true}}
	sb, err := runtime.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()
	script := `test -e ` + other + ` || echo "the checkout is not there"; cat /data/notes.txt`
	out, err := sb.Command(context.Background(), "sh", "-c", script).Output()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	// Output:
	// the checkout is not there
	// from the host
}
