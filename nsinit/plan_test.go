//go:build linux && cgo

package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
)

// planLines shows a plan one record a line: the kind, then what the
// record says (flags as "report" and "degradable", a nested message as
// the records it holds).
func planLines(t *testing.T, msg []byte) []string {
	t.Helper()
	recs, err := DecodeWire(msg)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		var s string
		switch r.Kind {
		case initLayer:
			s = fmt.Sprintf("layer %s", r.Blob(0))
		case initSkip:
			s = fmt.Sprintf("skip %s: %s", r.Blob(0), r.Blob(1))
		case initPhase:
			s = fmt.Sprintf("phase %s", r.Blob(0))
		case initSteps:
			s = fmt.Sprintf("steps %s %q%s %s", r.Blob(0), r.Blob(1), flagString(r.Int(0)), stepsString(t, r.Blob(2)))
		case initMounts:
			s = fmt.Sprintf("mounts %s %q%s", r.Blob(0), r.Blob(1), flagString(r.Int(0)))
		case initEgress:
			s = fmt.Sprintf("egress %s %q%s port %d fd %d", r.Blob(0), r.Blob(1), flagString(r.Int(0)), r.Int(1), r.Int(2))
		case initWallRoot:
			s = fmt.Sprintf("wall root %s", r.Blob(0))
		case initWall:
			s = fmt.Sprintf("wall %s %q%s fd %d %s or %s", r.Blob(0), r.Blob(1), flagString(r.Int(0)), r.Int(1), stepsString(t, r.Blob(2)), stepsString(t, r.Blob(3)))
		case initSubreaper:
			s = fmt.Sprintf("subreaper %s %q%s", r.Blob(0), r.Blob(1), flagString(r.Int(0)))
		case initChildRlimit:
			s = fmt.Sprintf("child rlimit %d %d %d", r.Int(0), r.Int(1), r.Int(2))
		case initUnixWall:
			s = fmt.Sprintf("unix wall %s if %s", r.Blob(1), r.Blob(0))
		default:
			t.Fatalf("record of kind %d", r.Kind)
		}
		out = append(out, s)
	}
	return out
}

func flagString(f uint64) string {
	var s string
	if f&initReport != 0 {
		s += " report"
	}
	if f&initDegradable != 0 {
		s += " degradable"
	}
	return s
}

// stepsString shows a nested confine.h message as its records.
func stepsString(t *testing.T, msg []byte) string {
	t.Helper()
	recs, err := DecodeWire(msg)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, r := range recs {
		switch r.Kind {
		case stepKeyring:
			parts = append(parts, "keyring")
		case stepHostname:
			parts = append(parts, "hostname "+string(r.Blob(0)))
		case stepLoopback:
			parts = append(parts, "loopback")
		case stepUserCount:
			parts = append(parts, fmt.Sprintf("user-count %s %d", r.Blob(0), r.Int(0)))
		case stepRlimit:
			parts = append(parts, fmt.Sprintf("rlimit %d %d %d %d", r.Int(0), r.Int(1), r.Int(2), r.Int(3)))
		case stepCgroupJoin:
			parts = append(parts, fmt.Sprintf("join %d", r.Int(0)))
		case stepCaps:
			parts = append(parts, fmt.Sprintf("caps %d %#x", r.Int(0), r.Int(1)))
		case stepLLRuleset:
			parts = append(parts, fmt.Sprintf("ruleset abi %d", r.Int(4)))
		case stepLLPath:
			parts = append(parts, fmt.Sprintf("path %s %#x %#x", r.Blob(0), r.Int(0), r.Int(1)))
		case stepLLPort:
			parts = append(parts, fmt.Sprintf("port %d", r.Int(1)))
		case stepLLRulesetFd:
			parts = append(parts, fmt.Sprintf("ruleset fd %d", r.Int(0)))
		case stepLLRestrict:
			parts = append(parts, "restrict")
		case stepSeccomp:
			parts = append(parts, fmt.Sprintf("seccomp %#x %q", r.Int(0), r.Blob(0)))
		default:
			t.Fatalf("step of kind %d", r.Kind)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TestEncodeConfig: a Config becomes the plan the Go init used to follow,
// in its order, with its skip, degrade and report rules.
func TestEncodeConfig(t *testing.T) {
	all := []Layer{LayerUserNS, LayerMountNS, LayerPidNS, LayerNetNS, LayerIPCNS, LayerUTSNS, LayerCgroupNS}
	nsLines := []string{
		"layer user-namespace", "layer mount-namespace", "layer pid-namespace", "layer network-namespace",
		"layer ipc-namespace", "layer uts-namespace", "layer cgroup-namespace",
	}
	plan := mounts.Plan{Mounts: []mounts.Mount{{Kind: mounts.HostRoot, Source: "/", Target: "/"}, {Kind: mounts.Tmpfs, Target: "/tmp", Mode: 0o1777}}}
	ll := &landlock.Ruleset{ABI: 3, HandledFS: 0xff, Paths: []landlock.PathRule{{Path: "/", Access: 0x1}, {Path: "/w", Access: 0xff}}}
	tests := []struct {
		name string
		c    Config
		want []string
	}{
		{"LevelLandlock as an ordinary user", Config{
			Unprivileged: true,
			Rlimits:      []cgroups.Rlimit{{Resource: unix.RLIMIT_AS, Soft: 1 << 30, Hard: 1 << 30}, {Resource: unix.RLIMIT_NOFILE, Soft: 100, Hard: 200}},
			Landlock:     ll,
			ModeWall:     []byte("modewall"),
			Seccomp:      []byte("profile"),
		}, []string{
			`subreaper exec "become a child subreaper"`,
			`steps session-keyring "join a new session keyring" report [keyring]`,
			"phase filesystem",
			fmt.Sprintf("child rlimit %d %d %d", unix.RLIMIT_AS, 1<<30, 1<<30),
			fmt.Sprintf(`steps rlimits "set rlimits" report [rlimit 0 %d 100 200]`, unix.RLIMIT_NOFILE),
			`steps capabilities "drop privileges" report [caps 0 0xcf]`,
			"layer no-new-privs",
			`steps landlock "restrict" report [ruleset abi 3, path / 0x1 0x1, path /w 0xff 0x7, restrict]`,
			`steps seccomp "load filter" report [seccomp 0x0 "modewall", seccomp 0x0 "profile"]`,
			"phase confine",
		}},
		{"namespaces, egress, v1 cgroup and a seccomp wall", Config{
			Mounts: plan, Hostname: "hutch", Namespaces: all, CgroupTasks: 2,
			Egress:     &Egress{Port: 3128},
			UnixWall:   &UnixWall{Filter: []byte("wall"), Allowed: []string{"/w", "/tmp"}},
			Seccomp:    []byte("profile"),
			UserCounts: map[string]uint64{"max_inotify_watches": 2048, "max_inotify_instances": 32},
		}, append(append([]string(nil), nsLines...),
			`steps user-counts "cap the per-user counts" report [user-count /proc/sys/user/max_inotify_instances 32, user-count /proc/sys/user/max_inotify_watches 2048]`,
			`steps session-keyring "join a new session keyring" report [keyring]`,
			// Reported as a namespace already.
			`steps uts-namespace "sethostname" [hostname hutch]`,
			`steps loopback "bring up loopback" report [loopback]`,
			`egress network-namespace "listen for the egress proxy" port 3128 fd 12`,
			"phase keyring-uts-loopback",
			`mounts filesystem "build the filesystem view" report`,
			"phase filesystem",
			`steps cgroup "join cgroup" [join 10, join 11]`,
			`steps capabilities "drop privileges" report [caps 1 0xcf]`,
			"layer no-new-privs",
			"wall root /w",
			"wall root /tmp",
			`wall unix-sockets "wall off unix sockets" report fd 12 [seccomp 0x28 "wall"] or [seccomp 0x8 "wall"]`,
			"unix wall seccomp-notify if unix-sockets",
			`steps seccomp "load filter" report [seccomp 0x0 "profile"]`,
			"phase confine",
		)},
		{"skipped by policy", Config{
			Mounts: plan, Hostname: "hutch", Namespaces: []Layer{LayerUserNS, LayerMountNS, LayerPidNS},
			// The filesystem is never skipped; the wall and seccomp are.
			Skip:     []Layer{LayerKeyring, LayerFilesystem, LayerUnixSockets, LayerSeccomp, LayerLoopback},
			UnixWall: &UnixWall{Allowed: []string{"/w"}},
		}, []string{
			"layer user-namespace", "layer mount-namespace", "layer pid-namespace",
			"skip session-keyring: skipped by policy",
			`steps uts-namespace "sethostname" report [hostname hutch]`,
			"phase keyring-uts-loopback",
			`mounts filesystem "build the filesystem view" report`,
			"phase filesystem",
			`steps capabilities "drop privileges" report [caps 1 0xcf]`,
			"layer no-new-privs",
			"skip unix-sockets: skipped by policy",
			"skip seccomp: skipped by policy",
			"phase confine",
		}},
		{"degradable, and the wall in Landlock", Config{
			Mounts: plan, Namespaces: all,
			Degradable: []Layer{LayerKeyring, LayerUTSNS, LayerLoopback, LayerUnixSockets, LayerFilesystem, LayerCapabilities, LayerSeccomp},
			Landlock:   &landlock.Ruleset{ABI: landlock.ResolveUnixABI, HandledFS: 0xff},
			UnixWall:   &UnixWall{Filter: []byte("wall"), Allowed: []string{"/w"}},
			Seccomp:    []byte("profile"),
		}, append(append([]string(nil), nsLines...),
			`steps session-keyring "join a new session keyring" report degradable [keyring]`,
			`steps uts-namespace "sethostname" degradable [hostname ]`,
			`steps loopback "bring up loopback" report degradable [loopback]`,
			"phase keyring-uts-loopback",
			`mounts filesystem "build the filesystem view" report`,
			"phase filesystem",
			`steps capabilities "drop privileges" report [caps 1 0xcf]`,
			"layer no-new-privs",
			fmt.Sprintf(`steps landlock "restrict" report [ruleset abi %d, restrict]`, landlock.ResolveUnixABI),
			"layer unix-sockets",
			"unix wall landlock if unix-sockets",
			`steps seccomp "load filter" report [seccomp 0x0 "profile"]`,
			"phase confine",
		)},
		{"Landlock without an ABI", Config{Landlock: &landlock.Ruleset{}, Seccomp: []byte("profile")}, []string{
			`subreaper exec "become a child subreaper"`,
			`steps session-keyring "join a new session keyring" report [keyring]`,
			"phase filesystem",
			`steps capabilities "drop privileges" report [caps 1 0xcf]`,
			"layer no-new-privs",
			// Restricts nothing, reported as the Go init did.
			`steps landlock "restrict" report []`,
			`steps seccomp "load filter" report [seccomp 0x0 "profile"]`,
			"phase confine",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := EncodeConfig(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			got := planLines(t, p.Message)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if tt.c.Mounts.Mounts == nil {
				return
			}
			// The filesystem step is the plan's expansion, which the
			// host keeps to read errors.
			steps, err := expandPlan(tt.c.Mounts, 0)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := encodeSteps(steps)
			recs, _ := DecodeWire(p.Message)
			for _, r := range recs {
				if r.Kind == initMounts && !bytes.Equal(r.Blob(2), want) {
					t.Errorf("mounts message differs from encodeSteps(expandPlan(plan))")
				}
			}
			if !reflect.DeepEqual(p.mounts, steps) {
				t.Errorf("plan keeps %d mount steps, want %d", len(p.mounts), len(steps))
			}
		})
	}
}

// TestEmptySteps: a step with nothing to do (every rlimit for the
// command, Landlock without an ABI) is an empty message, which the C runs
// as a success.
func TestEmptySteps(t *testing.T) {
	if err := run(); err != nil {
		t.Errorf("empty step message: %v", err)
	}
}

// TestEncodeConfigHostRuleset: with HostRuleset the rules on paths the
// view shares with the host are left to the host's ruleset, passed as the
// config frame's last fd (after the cgroup tasks files and the handoff
// socket), and the init adds only those on the sandbox's own filesystems
// and masks; in the host's mount namespace every rule is the host's.
func TestEncodeConfigHostRuleset(t *testing.T) {
	view := mounts.Plan{Mounts: []mounts.Mount{
		{Kind: mounts.HostRoot, Source: "/", Target: "/"},
		{Kind: mounts.Tmpfs, Target: "/tmp", Mode: 0o1777},
		{Kind: mounts.BindRW, Source: "/tmp/ws", Target: "/tmp/ws"},
		{Kind: mounts.BindRO, Source: "/srv/src", Target: "/opt/src"},
		{Kind: mounts.Mask, Target: "/etc/secret"},
	}}
	ll := &landlock.Ruleset{ABI: 3, HandledFS: 0xff, Paths: []landlock.PathRule{
		{Path: "/usr", Access: 0x1},          // the host's
		{Path: "/tmp", Access: 0xff},         // the sandbox's tmpfs
		{Path: "/tmp/ws", Access: 0xff},      // the host's again, bound at its own path
		{Path: "/opt/src", Access: 0x1},      // a host tree bound elsewhere
		{Path: "/etc/secret/x", Access: 0x1}, // under a mask
	}}
	ruleFor := func(lines []string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "steps landlock") {
				return l
			}
		}
		return ""
	}
	hostPaths := func(p *Plan) []string {
		var paths []string
		for _, r := range p.hostRules {
			paths = append(paths, r.Path)
		}
		return paths
	}
	all := []Layer{LayerUserNS, LayerMountNS, LayerPidNS, LayerNetNS, LayerIPCNS, LayerUTSNS, LayerCgroupNS}
	for _, tc := range []struct {
		name       string
		c          Config
		steps      string
		host       []string
		frameFds   int
		hasRuleset bool
	}{
		{"in a view of its own", Config{Mounts: view, Namespaces: all, CgroupTasks: 2, Egress: &Egress{Port: 1}, Landlock: ll, HostRuleset: true, Seccomp: []byte("p")},
			`steps landlock "restrict" report [ruleset fd 13, path /tmp 0xff 0x7, path /opt/src 0x1 0x1, path /etc/secret/x 0x1 0x1, restrict]`,
			[]string{"/usr", "/tmp/ws"}, 4, true},
		{"in the host's namespaces", Config{Landlock: ll, HostRuleset: true, Seccomp: []byte("p")},
			`steps landlock "restrict" report [ruleset fd 10, restrict]`,
			[]string{"/usr", "/tmp", "/tmp/ws", "/opt/src", "/etc/secret/x"}, 1, true},
		{"without HostRuleset", Config{Mounts: view, Namespaces: all, Landlock: ll, Seccomp: []byte("p")},
			`steps landlock "restrict" report [ruleset abi 3, path /usr 0x1 0x1, path /tmp 0xff 0x7, path /tmp/ws 0xff 0x7, path /opt/src 0x1 0x1, path /etc/secret/x 0x1 0x1, restrict]`,
			nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := EncodeConfig(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := ruleFor(planLines(t, p.Message)); got != tc.steps {
				t.Errorf("landlock steps:\n got %s\nwant %s", got, tc.steps)
			}
			if got := hostPaths(p); !slices.Equal(got, tc.host) {
				t.Errorf("the host's rules: %v, want %v", got, tc.host)
			}
			if got := tc.c.wantFds(); got != tc.frameFds {
				t.Errorf("config frame fds: %d, want %d", got, tc.frameFds)
			}
			if (p.landlock != nil) != tc.hasRuleset {
				t.Errorf("Ruleset would begin one: %v, want %v", p.landlock != nil, tc.hasRuleset)
			}
		})
	}
}

// TestEncodeConfigRefuses: a Config the init could not run safely is not
// encoded.
func TestEncodeConfigRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		want string
	}{
		{"no seccomp filter", Config{}, "no seccomp filter"},
		{"too many fds", Config{CgroupTasks: initMaxFds, Egress: &Egress{Port: 1}, Seccomp: []byte("p")}, "fds"},
		{"bad mount plan", Config{Namespaces: []Layer{LayerMountNS}, Mounts: mounts.Plan{Mounts: []mounts.Mount{{Kind: "nope", Target: "/"}}}, Seccomp: []byte("p")}, "mounts"},
	} {
		if _, err := EncodeConfig(tt.c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one saying %q", tt.name, err, tt.want)
		}
	}
}

// TestEncodeConfigCarves: the Landlock carve-out is listed when the plan
// is encoded, from the host's tree.
func TestEncodeConfigCarves(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"secret", "pub"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := landlock.Ruleset{ABI: 3, HandledFS: 0xff, ExpandDeny: []landlock.PathRule{{Path: dir, Access: 0xff}}, Deny: []string{filepath.Join(dir, "secret")}}
	p, err := EncodeConfig(Config{Landlock: &r, Seccomp: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	var steps string
	for _, l := range planLines(t, p.Message) {
		if strings.HasPrefix(l, "steps landlock") {
			steps = l
		}
	}
	if !strings.Contains(steps, "path "+filepath.Join(dir, "pub")+" ") || strings.Contains(steps, "secret") {
		t.Errorf("landlock step %s: want pub granted, secret left out", steps)
	}
}

// TestEncodeCommand: the command is one record, lists as C strings; a
// string with a NUL of its own is refused, naming its field.
func TestEncodeCommand(t *testing.T) {
	b, err := EncodeCommand(Command{Path: "sh", Args: []string{"sh", "-c", ""}, Env: []string{"A=1"}, Dir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := DecodeWire(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{{Kind: cmdExec, Blobs: [][]byte{[]byte("sh"), []byte("/w"), []byte("sh\x00-c\x00\x00"), []byte("A=1\x00"), {}, {}}}}
	if !reflect.DeepEqual(normalize(recs), normalize(want)) {
		t.Errorf("command %v, want %v", recs, want)
	}
	for _, tt := range []struct {
		cmd   Command
		field string
	}{
		{Command{Path: "s\x00h"}, "path"},
		{Command{Path: "sh", Dir: "/\x00"}, "dir"},
		{Command{Path: "sh", Args: []string{"a", "b\x00"}}, "argument"},
		{Command{Path: "sh", Env: []string{"A=\x00"}}, "environment variable"},
		{Command{Path: "sh", Roots: []string{"/w\x00"}}, "root"},
		{Command{Path: "sh", Refused: []string{"/proc\x00"}}, "refused tree"},
	} {
		if _, err := EncodeCommand(tt.cmd); err == nil || !strings.Contains(err.Error(), "command "+tt.field+" ") {
			t.Errorf("%+v: err = %v, want one naming the %s", tt.cmd, err, tt.field)
		}
	}
}

// event encodes recs as one event message.
func event(t *testing.T, recs ...Record) []byte {
	t.Helper()
	b, err := EncodeWire(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func errorRecord(errno syscall.Errno, executor uint64, index int, layer Layer, op, stepOp, path string) Record {
	var refused uint64
	if index < 0 {
		refused = 1 // as mounts.c says of a malformed message
	}
	return Record{Kind: evError, Ints: []uint64{uint64(errno), executor, uint64(int64(index)), refused},
		Blobs: [][]byte{[]byte(layer), []byte(op), []byte(stepOp), []byte(path)}}
}

// TestReadEvent: what the init writes, the host reads back as the
// Events and SetupErrors the Go init used to send.
func TestReadEvent(t *testing.T) {
	bind := mounts.Mount{Kind: mounts.BindRW, Source: "/w", Target: "/w"}
	p, err := EncodeConfig(Config{
		Namespaces: []Layer{LayerMountNS},
		Mounts:     mounts.Plan{Mounts: []mounts.Mount{{Kind: mounts.HostRoot, Source: "/", Target: "/"}, bind}},
		Seccomp:    []byte("p"),
	})
	if err != nil {
		t.Fatal(err)
	}
	bindIndex := 2 // prepare, root, then the bind
	if p.mounts[bindIndex].from != bind {
		t.Fatalf("mount step %d is %+v, want the bind", bindIndex, p.mounts[bindIndex].from)
	}
	tests := []struct {
		name string
		recs []Record
		want Event
	}{
		{"ready", []Record{{Kind: evReady}}, Event{Kind: EventReady}},
		{"started", []Record{
			{Kind: evStarted, Ints: []uint64{42}},
			{Kind: evLayer, Blobs: [][]byte{[]byte(LayerPidNS)}},
			{Kind: evLayer, Blobs: [][]byte{[]byte(LayerSeccomp)}},
			{Kind: evSkipped, Blobs: [][]byte{[]byte(LayerLoopback), []byte("bring up loopback: operation not permitted")}},
			{Kind: evPhase, Ints: []uint64{1000, 0}, Blobs: [][]byte{[]byte(FirstPhase)}},
			{Kind: evPhase, Ints: []uint64{1000, 250}, Blobs: [][]byte{[]byte("config")}},
			{Kind: evUnixWall, Blobs: [][]byte{[]byte(UnixWallNotify)}},
		}, Event{
			Kind: EventStarted, Pid: 42, Layers: []Layer{LayerPidNS, LayerSeccomp},
			Skipped:  []Skipped{{LayerLoopback, "bring up loopback: operation not permitted"}},
			Phases:   []Phase{{FirstPhase, 1000, 0}, {"config", 1000, 250}},
			UnixWall: UnixWallNotify,
		}},
		{"exited", []Record{{Kind: evExited, Ints: []uint64{3 << 8}}}, Event{Kind: EventExited, ExitCode: 3}},
		{"killed", []Record{{Kind: evExited, Ints: []uint64{uint64(unix.SIGKILL)}}}, Event{Kind: EventExited, ExitCode: -1, Signal: int(unix.SIGKILL)}},
		{"not found", []Record{errorRecord(unix.ENOENT, evExecInit, 0, "", OpLookPath, `"nope" not found in PATH`, "nope")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerExec, Op: OpLookPath, Path: "nope", Errno: int(unix.ENOENT), Msg: `"nope" not found in PATH: no such file or directory`}}},
		{"exec", []Record{errorRecord(unix.EACCES, evExecInit, 0, "", OpExec, "", "/w/x")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerExec, Op: OpExec, Path: "/w/x", Errno: int(unix.EACCES), Msg: "permission denied"}}},
		{"without errno", []Record{errorRecord(0, evExecInit, 0, "", "chdir", `working directory "/etc" is outside`, "/w")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerFilesystem, Op: "chdir", Path: "/w", Msg: `working directory "/etc" is outside`}}},
		{"child rlimits", []Record{errorRecord(unix.EPERM, evExecSteps, 0, "", "set the command's rlimits", "prlimit RLIMIT_AS", "")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerRlimits, Op: "set the command's rlimits", Errno: int(unix.EPERM), Msg: "prlimit RLIMIT_AS: operation not permitted"}}},
		{"confine step", []Record{errorRecord(unix.EPERM, evExecSteps, 0, LayerCapabilities, "drop privileges", "drop capability 0 from the bounding set", "")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerCapabilities, Op: "drop privileges", Errno: int(unix.EPERM), Msg: "drop capability 0 from the bounding set: operation not permitted"}}},
		{"mount step", []Record{errorRecord(unix.ENOENT, evExecMounts, bindIndex, LayerFilesystem, "build the filesystem view", "open source", "/w")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerFilesystem, Op: "build the filesystem view", Path: "/w", Errno: int(unix.ENOENT),
				Msg: (&mounts.Error{Step: bind, Op: "open source", Path: "/w", Err: unix.ENOENT}).Error()}}},
		{"mounts refused", []Record{errorRecord(unix.EINVAL, evExecMounts, -1, LayerFilesystem, "build the filesystem view", "bad magic", "")},
			Event{Kind: EventError, Error: &SetupError{Layer: LayerFilesystem, Op: "build the filesystem view",
				Msg: fmt.Errorf("%w: mount step -1: bad magic", ErrWire).Error()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadEvent(bytes.NewReader(event(t, tt.recs...)), p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("event\n %+v (%+v)\nwant\n %+v (%+v)", got, got.Error, tt.want, tt.want.Error)
			}
		})
	}
}

// TestReadEventStream: events follow each other on the pipe; its end is
// io.EOF, an end inside an event is not.
func TestReadEventStream(t *testing.T) {
	ready := event(t, Record{Kind: evReady})
	exited := event(t, Record{Kind: evExited, Ints: []uint64{0}})
	r := bytes.NewReader(append(append([]byte{}, ready...), exited...))
	for _, want := range []string{EventReady, EventExited} {
		if ev, err := ReadEvent(r, nil); err != nil || ev.Kind != want {
			t.Fatalf("event %+v (%v), want %s", ev, err, want)
		}
	}
	if _, err := ReadEvent(r, nil); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
	for _, cut := range []int{5, len(exited) - 1} {
		if _, err := ReadEvent(bytes.NewReader(exited[:cut]), nil); err != io.ErrUnexpectedEOF {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
}

// TestReadEventRefuses: what is not an event is an error, not an event.
func TestReadEventRefuses(t *testing.T) {
	huge := event(t, Record{Kind: evReady})
	huge[8], huge[9], huge[10], huge[11] = 0, 0, 0, 1 // 16 MiB
	for _, tt := range []struct {
		name string
		msg  []byte
	}{
		{"not a message", []byte("not a wire message at all")},
		{"over the bound", huge},
		{"no records", event(t)},
		{"unknown kind", event(t, Record{Kind: 0x7f})},
		{"a layer first", event(t, Record{Kind: evLayer, Blobs: [][]byte{[]byte("x")}})},
		{"records after ready", event(t, Record{Kind: evReady}, Record{Kind: evLayer, Blobs: [][]byte{[]byte("x")}})},
		{"started without a pid", event(t, Record{Kind: evStarted})},
		{"an error short of blobs", event(t, Record{Kind: evError, Ints: []uint64{1, 0, 0, 0}, Blobs: [][]byte{[]byte("x")}})},
		{"exited in a started event", event(t, Record{Kind: evStarted, Ints: []uint64{1}}, Record{Kind: evExited, Ints: []uint64{0}})},
	} {
		if ev, err := ReadEvent(bytes.NewReader(tt.msg), nil); !errors.Is(err, ErrWire) {
			t.Errorf("%s: %+v, %v; want ErrWire", tt.name, ev, err)
		}
	}
}

// TestInitConstants: what Go and init.h each define alone agree.
func TestInitConstants(t *testing.T) {
	if maxFrame != initMaxFrame {
		t.Errorf("maxFrame %d, init.h's INIT_MAX_FRAME %d", maxFrame, initMaxFrame)
	}
	if FirstPhase != "init-start" {
		t.Errorf("FirstPhase %q", FirstPhase)
	}
}

// TestInitOpLayers: every operation the init reports by name alone
// (report_init_error, report_error in the C sources) has its layer in
// initOpLayers, and the table names no operation the init never reports.
func TestInitOpLayers(t *testing.T) {
	files, err := filepath.Glob("*.c")
	if err != nil || len(files) == 0 {
		t.Fatal("no C sources", err)
	}
	call := regexp.MustCompile(`report_(?:init_)?error\(([^,]*),`)
	literal := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	reported := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			if strings.HasPrefix(m[1], "const char") {
				continue // a declaration
			}
			for _, l := range literal.FindAllStringSubmatch(m[1], -1) {
				reported[l[1]] = true
			}
		}
	}
	if len(reported) < 5 {
		t.Fatalf("found only %v in the C sources' reports", reported)
	}
	for op := range reported {
		if _, ok := initOpLayers[op]; !ok {
			t.Errorf("the init reports %q, which initOpLayers gives no layer", op)
		}
	}
	for op := range initOpLayers {
		if !reported[op] {
			t.Errorf("initOpLayers has %q, which the init never reports", op)
		}
	}
}
