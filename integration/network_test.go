//go:build linux

package integration

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// loopbackListener is a host service on 127.0.0.1 that counts the
// connections it accepts: the host-side verdict on what reached it.
func loopbackListener(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	return countingListener(t, "127.0.0.1:0")
}

// hostListener is a counting host service on every address of the host,
// and the addresses to try it at: loopback and the host's first
// non-loopback IPv4 address.
func hostListener(t *testing.T) (port int, targets []string, accepted *atomic.Int32) {
	t.Helper()
	port, accepted = countingListener(t, "0.0.0.0:0")
	targets = []string{"127.0.0.1"}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				targets = append(targets, ipn.IP.String())
				break
			}
		}
	}
	return port, targets, accepted
}

// countingListener is a host service on addr that counts the connections
// it accepts.
func countingListener(t *testing.T, addr string) (port int, accepted *atomic.Int32) {
	t.Helper()
	l, accepted := counting(t, "tcp4", addr)
	return l.Addr().(*net.TCPAddr).Port, accepted
}

// counting listens on network's addr and counts the connections it
// accepts, until the test ends.
func counting(t *testing.T, network, addr string) (net.Listener, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := new(atomic.Int32)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return l, accepted
}

// connectScript tries a TCP connection to 127.0.0.1:port.
func connectScript(port int) string {
	return `import socket
try:
    socket.create_connection(("127.0.0.1", ` + strconv.Itoa(port) + `), 3).close()
except OSError:
    pass`
}

// TestNetworkModes: "none" (the default) reaches nothing of the host's,
// "host" reaches the host's loopback and is reported as such.
func TestNetworkModes(t *testing.T) {
	for _, tc := range []struct {
		mode      runtime.NetworkMode
		reach     bool
		netnsWant bool
	}{{runtime.NetworkNone, false, true}, {"", false, true}, {runtime.NetworkHost, true, false}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			port, accepted := loopbackListener(t)
			ws := dir(t, "ws-")
			sb := newSandbox(t, ws, func(p *runtime.Policy) { p.Network = tc.mode })
			cmd := sb.Command(context.Background(), "python3", "-c", connectScript(port))
			if err := cmd.Run(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // let the accept loop count
			if got := accepted.Load() > 0; got != tc.reach {
				t.Errorf("host: the loopback listener accepted %d connections; reachable = %v, want %v", accepted.Load(), got, tc.reach)
			}
			r := cmd.Result
			if has := slices.Contains(r.Layers, runtime.LayerNetNS); has != tc.netnsWant {
				t.Errorf("layers %v: network namespace = %v, want %v", r.Layers, has, tc.netnsWant)
			}
			want := tc.mode
			if want == "" {
				want = runtime.NetworkNone
			}
			if r.Network != want {
				t.Errorf("Result.Network = %q, want %q", r.Network, want)
			}
		})
	}
}

// TestNetworkHostModeSaid: the Result says a --net host run shared the
// host's network, and the CLI says so on stderr with --verbose; without,
// the command's stderr is its own (the caller asked for --net host).
func TestNetworkHostModeSaid(t *testing.T) {
	ws := dir(t, "ws-")
	r := sh(t, ws, "true", "--net", "host", "--verbose")
	if r.code != 0 || !strings.Contains(r.stderr, "host's network") || r.result == nil || r.result.Network != runtime.NetworkHost {
		t.Errorf("--verbose: exit %d, stderr %q, result %+v", r.code, r.stderr, r.result)
	}
	r = sh(t, ws, "true", "--net", "host")
	if r.code != 0 || strings.Contains(r.stderr, "host's network") || r.result == nil || r.result.Network != runtime.NetworkHost {
		t.Errorf("exit %d, stderr %q, result %+v", r.code, r.stderr, r.result)
	}
}

// TestNetworkPolicyErrors: bad network settings are refused before
// anything starts, naming the flag and the value as typed.
func TestNetworkPolicyErrors(t *testing.T) {
	ws := dir(t, "ws-")
	for _, tc := range []struct {
		flags []string
		field string
	}{
		{[]string{"--net", "wifi"}, "--net wifi: "},
		{[]string{"--allow-domain", "example.com"}, "--allow-domain example.com: "},
		{[]string{"--net", "host", "--package-managers", "node"}, "--package-managers node: "},
	} {
		r := sh(t, ws, "touch ran", tc.flags...)
		if r.code != 125 || !strings.Contains(r.stderr, tc.field) {
			t.Errorf("%v: exit %d, stderr %q; want 125 naming %s", tc.flags, r.code, r.stderr, tc.field)
		}
	}
}
