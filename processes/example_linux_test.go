package processes_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/hutchbox/hutch/processes"
	"github.com/hutchbox/hutch/runtime"
)

// hutch is the supervisor program: a hutch binary. Here it is this test
// binary, whose TestMain calls processes.SupervisorMain as hutch's main does.
var hutch, _ = os.Executable()

// A dev server that outlives the agent: started in the workspace's
// sandbox, found again by a later Open (in this program or another), and
// stopped.
func ExampleManager() {
	dataDir, _ := os.MkdirTemp("", "hutch-state-")
	workspace, _ := os.MkdirTemp("", "hutch-ws-")
	defer os.RemoveAll(dataDir)
	defer os.RemoveAll(workspace)
	ctx := context.Background()

	m, err := processes.Open(dataDir)
	if err != nil {
		log.Fatal(err)
	}
	m.Supervisor = hutch // empty: the hutch on $PATH
	p, err := m.Start(ctx, processes.Spec{
		Name:   "dev-server",
		Policy: runtime.DefaultPolicy(workspace),
		Args:   []string{"sh", "-c", "while :; do date > heartbeat; sleep 1; done"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Name, p.Status)
	m.Close() // the process runs on

	// Later, perhaps after a restart of the agent:
	m, err = processes.Open(dataDir)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	again, _ := m.Get(p.ID)
	fmt.Println(again.Name, again.Status, again.Pid == p.Pid)
	if err := m.Stop(ctx, p.ID); err != nil {
		log.Fatal(err)
	}
	stopped, _ := m.Get(p.ID)
	fmt.Println(stopped.Name, stopped.Status)
	// Output:
	// dev-server running
	// dev-server running true
	// dev-server stopped
}
