package runtime_test

import (
	"context"
	"testing"

	"github.com/hutchbox/hutch/runtime"
)

func TestZZSmoke(t *testing.T) {
	ws := t.TempDir()
	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		t.Fatal(err)
	}
	c := sb.Command(context.Background(), "sh", "-c", "echo hi > f; cat f; pwd; echo $HOME; id")
	out, err := c.CombinedOutput()
	t.Logf("%s %v %+v", out, err, c.Result)
	t.Logf("%+v", sb.Policy())
}
