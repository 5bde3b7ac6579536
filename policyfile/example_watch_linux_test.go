package policyfile_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchbox/hutch/policyfile"
)

// Watch keeps a Sandbox on a policy file: a change, written in place or
// renamed over it, is put in effect for the commands started after it
// (Sandbox.Reload), and a change that does not validate keeps the old
// policy, with the file's line in the error.
func ExampleWatch() {
	dir, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ws, file := filepath.Join(dir, "ws"), filepath.Join(dir, "hutch.toml")
	os.Mkdir(ws, 0o755)
	write := func(content string) {
		tmp := file + ".new"
		os.WriteFile(tmp, []byte(content), 0o644)
		os.Rename(tmp, file) // in place at once
	}
	write("version = 1\n[sandbox]\nenv = [\"STAGE=first\"]\n")

	reloaded := make(chan error, 1)
	w, err := policyfile.Watch(file, ws, "", func(err error) { reloaded <- err })
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	stage := func() string {
		out, _ := w.Sandbox().Command(context.Background(), "sh", "-c", "echo $STAGE").Output()
		return string(out)
	}
	wait := func() error {
		select {
		case err := <-reloaded:
			return err
		case <-time.After(time.Minute):
			return fmt.Errorf("no reload")
		}
	}
	fmt.Print(stage())

	write("version = 1\n[sandbox]\nenv = [\"STAGE=second\"]\n")
	fmt.Println("reload:", wait())
	fmt.Print(stage())

	write("version = 1\n[sandbox]\nenv = [\"STAGE=third\"]\nnetwork = \"sometimes\"\n")
	fmt.Println("reload:", strings.TrimPrefix(fmt.Sprint(wait()), dir+"/"))
	fmt.Print(stage())
	// Output:
	// first
	// reload: <nil>
	// second
	// reload: hutch.toml:4: sandbox.network: "sometimes": not a network mode (none, allow or host)
	// second
}
