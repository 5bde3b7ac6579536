//go:build linux && cgo

package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchbox/hutch/cgroups"
	"github.com/hutchbox/hutch/landlock"
	"github.com/hutchbox/hutch/mounts"
)

// The host decides everything the sandbox init (init.c) does: EncodeConfig
// writes a Config as the init's plan, records the init runs in order
// (init.h's INIT_*), each naming its layer and operation so that the
// init's events can say which step failed; EncodeCommand writes the
// command; ReadEvent reads what the init reports.

// Plan is a Config encoded for the init.
type Plan struct {
	// Message is the config frame's payload; the frame carries the
	// Config's cgroup v1 tasks files, then, if it HandsOff, the handoff
	// socket, then, with HostRuleset, the Landlock ruleset (Ruleset).
	Message []byte
	// mounts are the filesystem step's records, which the init's errors
	// name by index.
	mounts []mountStep
	// landlock and hostRules are what Ruleset begins, with a Config's
	// HostRuleset.
	landlock  *landlock.Ruleset
	hostRules []landlock.Rule
	// listed is what the Landlock carve-outs were worked out from.
	listed landlock.Listed
}

// Current reports whether p is still the plan EncodeConfig would make of
// the same Config: it reads nothing from the host but the directories the
// Landlock carve-outs list, and those are unchanged (landlock.Listed). A
// current plan may be sent to another init; it is never changed once made.
func (p *Plan) Current() bool { return p.listed.Current() }

// Ruleset begins the plan's Landlock ruleset on the host with the rules
// left to it, for a Config with HostRuleset: the config frame's last fd,
// which the caller closes once the frame is sent. nil when the Config
// has none.
func (p *Plan) Ruleset() (*os.File, error) {
	if p.landlock == nil {
		return nil, nil
	}
	return p.landlock.Create(p.hostRules)
}

// neverDegrade are skipped by no configuration: without them there is no
// sandbox (a failed filesystem step leaves the host tree reachable).
var neverDegrade = []Layer{LayerFilesystem, LayerCapabilities, LayerNoNewPrivs, LayerSeccomp, LayerUserNS, LayerMountNS, LayerPidNS}

// EncodeConfig writes c as the init's plan, in this order:
//
//   - each of c.Namespaces reported enforced (the init runs inside them);
//   - without namespaces (LevelLandlock): become a child subreaper, join a
//     new session keyring;
//   - otherwise: the keyring, the host name, in a network namespace of
//     its own loopback up and the egress listener, phase
//     "keyring-uts-loopback", the filesystem view;
//   - phase "filesystem";
//   - rlimits, the cgroup v1 join, privileges dropped, Landlock, the unix
//     wall, seccomp (the mode wall, then the profile);
//   - phase "confine".
//
// A layer c.Skip holds is reported skipped instead of set up, and one
// c.Degradable holds is reported skipped when its step fails, except the
// neverDegrade ones; every other failure ends the init with an error
// event. Seccomp is the exception to both: it is skipped when c.Skip says
// so, and otherwise required.
//
// The Landlock carve-outs (landlock.Ruleset.Rules) are listed here, on
// the host, and enforced in the sandbox's view; both list the same names.
// The carved trees are those runtime's carvable keeps, outside every mount
// of the view's own, and there the view is the host's tree bound
// read-only at the same paths (at LevelLandlock, the host's tree itself).
// Should a name be missing from the view after all, the init's C step
// gives it no rule and goes on (confine.c's ll_path: ENOENT), and a
// directory the host cannot list is granted nothing beneath it (Rules).
func EncodeConfig(c Config) (*Plan, error) {
	if n := c.wantFds(); n > initMaxFds {
		return nil, fmt.Errorf("nsinit: a config frame of %d fds, over the init's %d", n, initMaxFds)
	}
	if len(c.Seccomp) == 0 && !slices.Contains(c.Skip, LayerSeccomp) {
		// No filter and no skip is a config bug: fail closed.
		return nil, errors.New("nsinit: no seccomp filter, and the policy does not skip the seccomp layer")
	}
	p := &planner{c: &c}
	for _, l := range c.Namespaces {
		p.layer(l)
	}
	p.setup()
	p.phase("filesystem")
	p.confine()
	p.phase("confine")
	if p.err != nil {
		return nil, p.err
	}
	msg, err := EncodeWire(p.recs...)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Message: msg, mounts: p.mounts, listed: p.listed}
	if c.hostRuleset() {
		plan.landlock, plan.hostRules = c.Landlock, p.hostRules
	}
	return plan, nil
}

// planner builds one plan.
type planner struct {
	c    *Config
	recs []Record
	// reported are the layers the plan reports enforced once their steps
	// succeed: each is reported once.
	reported  []Layer
	mounts    []mountStep
	hostRules []landlock.Rule // the Landlock rules the host adds
	listed    landlock.Listed // what the carve-outs were listed from
	err       error           // the first encoding error
}

// fail records err, if it is the first.
func (p *planner) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

func (p *planner) add(kind uint16, ints []uint64, blobs ...[]byte) {
	p.recs = append(p.recs, Record{Kind: kind, Ints: ints, Blobs: blobs})
}

// layer reports l enforced.
func (p *planner) layer(l Layer) {
	p.add(initLayer, nil, []byte(l))
	p.reported = append(p.reported, l)
}

// skip reports l skipped by the policy.
func (p *planner) skip(l Layer) { p.add(initSkip, nil, []byte(l), []byte("skipped by policy")) }

func (p *planner) phase(name string) { p.add(initPhase, nil, []byte(name)) }

// step adds a step record: its ints start with flags, its blobs with
// layer and op. A step that would report a layer already reported does
// not (the host name's step runs in the uts namespace, reported as such).
func (p *planner) step(kind uint16, l Layer, op string, flags uint64, ints []uint64, blobs ...[]byte) {
	if flags&initReport != 0 {
		if slices.Contains(p.reported, l) {
			flags &^= initReport
		} else {
			p.reported = append(p.reported, l)
		}
	}
	p.add(kind, append([]uint64{flags}, ints...), append([][]byte{[]byte(l), []byte(op)}, blobs...)...)
}

// try is how a layer the policy may skip or degrade is set up: it
// returns false when c.Skip holds l (the layer is reported skipped), and
// otherwise the flags of l's step: reported once it succeeds, degradable
// if c.Degradable holds l. The neverDegrade layers are neither.
func (p *planner) try(l Layer) (flags uint64, ok bool) {
	never := slices.Contains(neverDegrade, l)
	if slices.Contains(p.c.Skip, l) && !never {
		p.skip(l)
		return 0, false
	}
	flags = initReport
	if slices.Contains(p.c.Degradable, l) && !never {
		flags |= initDegradable
	}
	return flags, true
}

// steps adds a step of confine.h records run by try's rules.
func (p *planner) steps(l Layer, op string, recs ...Record) {
	if flags, ok := p.try(l); ok {
		p.step(initSteps, l, op, flags, nil, p.message(recs...))
	}
}

// message encodes recs as one nested message.
func (p *planner) message(recs ...Record) []byte {
	b, err := EncodeWire(recs...)
	if err != nil {
		p.fail(err)
	}
	return b
}

// sharedWithHost reports whether path leads to the same file in the view
// as on the host: in the host's mount namespace (LevelLandlock) every
// path does; in a view of its own, a path the plan binds from the host at
// that same path (mounts.Plan.Lookup), not one of the sandbox's own
// filesystems (/tmp, /dev, /proc) or a mask.
func (p *planner) sharedWithHost(path string) bool {
	if !slices.Contains(p.c.Namespaces, LayerMountNS) {
		return true
	}
	pl := p.c.Mounts.Lookup(path)
	return pl.Reach == mounts.OnHost && pl.HostPath == path
}

// handoff is the handoff socket's fd in the init.
func (p *planner) handoff() uint64 { return uint64(initFdBase + p.c.CgroupTasks) }

// setup builds the sandbox around the init: identity, network,
// filesystem. Privileges are dropped in confine, after the last step that
// needs them.
func (p *planner) setup() {
	c := p.c
	if len(c.Namespaces) == 0 {
		// The host's namespaces (LevelLandlock): nothing to build, and
		// the init must keep what its command forks below itself, since
		// no pid namespace will end them (see KillDescendants).
		p.step(initSubreaper, LayerExec, "become a child subreaper", 0, nil)
		p.steps(LayerKeyring, "join a new session keyring", keyringSteps()...)
		return
	}
	if len(c.UserCounts) > 0 {
		p.steps(LayerUserCounts, "cap the per-user counts", userCountSteps(c.UserCounts)...)
	}
	p.steps(LayerKeyring, "join a new session keyring", keyringSteps()...)
	p.steps(LayerUTSNS, "sethostname", hostnameSteps(c.Hostname)...)
	p.network()
	p.phase("keyring-uts-loopback")
	steps, err := expandPlan(c.Mounts, 0)
	if err != nil {
		p.fail(err)
		return
	}
	msg, err := encodeSteps(steps)
	if err != nil {
		p.fail(err)
		return
	}
	p.mounts = steps
	if flags, ok := p.try(LayerFilesystem); ok {
		p.step(initMounts, LayerFilesystem, "build the filesystem view", flags, nil, msg)
	}
}

// network sets up the sandbox's network namespace: loopback up, and the
// egress listener when the policy allows some destinations. With the
// host's network (no namespace of its own) there is nothing to do.
func (p *planner) network() {
	if !slices.Contains(p.c.Namespaces, LayerNetNS) {
		return
	}
	p.steps(LayerLoopback, "bring up loopback", loopbackSteps()...)
	if e := p.c.Egress; e != nil {
		p.step(initEgress, LayerNetNS, "listen for the egress proxy", 0, []uint64{uint64(e.Port), p.handoff()})
	}
	for _, port := range p.c.Reach {
		p.step(initEgress, LayerNetNS, "listen for a reached port", 0, []uint64{uint64(port), p.handoff()})
	}
	if p.c.Ingress {
		p.add(initIngress, []uint64{p.handoff()})
	}
}

// confine drops every privilege and loads the seccomp filter on the
// thread that will fork the command. After it the init holds nothing the
// command could want, so it may wait for its command as long as it likes.
func (p *planner) confine() {
	c := p.c
	if len(c.Rlimits) > 0 {
		var own []cgroups.Rlimit
		for _, r := range c.Rlimits {
			if r.ForChild() {
				p.add(initChildRlimit, []uint64{uint64(r.Resource), r.Soft, r.Hard})
			} else {
				own = append(own, r)
			}
		}
		p.step(initSteps, LayerRlimits, "set rlimits", initReport, nil, p.message(rlimitSteps(0, own)...))
	}
	if c.CgroupTasks > 0 {
		// The forking thread joins: the command is born in the group.
		fds := make([]int, c.CgroupTasks)
		for i := range fds {
			fds[i] = initFdBase + i
		}
		p.step(initSteps, LayerCgroup, "join cgroup", 0, nil, p.message(cgroupSteps(fds)...))
	}
	p.step(initSteps, LayerCapabilities, "drop privileges", initReport, nil, p.message(privilegeSteps(!c.Unprivileged)...))
	p.layer(LayerNoNewPrivs)
	// Landlock needs no_new_privs (its step sets it) and must come
	// before seccomp, whose filter does not allow its system calls.
	if c.Landlock != nil {
		hostFd := -1
		if c.hostRuleset() {
			hostFd = initFdBase + c.wantFds() - 1
		}
		recs, host, from, err := landlockSteps(*c.Landlock, hostFd, p.sharedWithHost)
		if err != nil {
			p.fail(err)
		}
		p.hostRules, p.listed = host, from
		p.step(initSteps, LayerLandlock, "restrict", initReport, nil, p.message(recs...))
	}
	notify, withWall := p.notifying()
	if c.UnixWall != nil && !withWall {
		p.unixWall()
	}
	// Last: from here on the forking thread runs under the command's
	// filter.
	if slices.Contains(c.Skip, LayerSeccomp) {
		p.skip(LayerSeccomp)
		return
	}
	var recs []Record
	if len(c.ModeWall) > 0 {
		// Before the profile, which need not allow seccomp(2).
		recs = append(recs, seccompStep(c.ModeWall))
	}
	if !notify {
		recs = append(recs, seccompStep(c.Seccomp))
		p.step(initSteps, LayerSeccomp, "load filter", initReport, nil, p.message(recs...))
		return
	}
	if len(recs) > 0 {
		p.step(initSteps, LayerSeccomp, "load mode wall", 0, nil, p.message(recs...))
	}
	prog := c.Denials.Filter
	if withWall {
		prog = c.Denials.WithWall
		for _, a := range c.UnixWall.Allowed {
			p.add(initWallRoot, nil, []byte(a))
		}
	}
	first, fallback := listenerSteps(prog)
	p.step(initWall, LayerSeccomp, "load filter", initReport, []uint64{p.handoff()}, p.message(first), p.message(fallback))
	if withWall {
		p.layer(LayerUnixSockets)
		p.add(initUnixWall, nil, []byte(LayerUnixSockets), []byte(UnixWallNotify))
	}
}

// notifying says whether the filter is loaded in its notifying form
// (c.Denials), and whether with the unix wall chained in: where the wall
// is a filter of its own (a listener), it must be that one filter, since a
// process has one listener; where the wall may degrade, its failure must
// not take the profile with it, so nothing notifies then. Where Landlock
// guards socket files, the wall needs no filter.
func (p *planner) notifying() (notify, withWall bool) {
	c := p.c
	if c.Denials == nil || slices.Contains(c.Skip, LayerSeccomp) {
		return false, false
	}
	wallFilter := c.UnixWall != nil && !slices.Contains(c.Skip, LayerUnixSockets) &&
		(c.Landlock == nil || c.Landlock.ABI < landlock.ResolveUnixABI)
	if !wallFilter {
		return len(c.Denials.Filter) > 0, false
	}
	if slices.Contains(c.Degradable, LayerUnixSockets) || len(c.Denials.WithWall) == 0 {
		return false, false
	}
	return true, true
}

// unixWall sets up the unix-sockets layer, after Landlock and before the
// profile (which may not allow seccomp(2)): nothing to add where the
// Landlock ruleset already guards socket files, otherwise the notifying
// filter, whose listener the host answers for the sandbox's life. The
// init hands the host the allowed trees, opened in its view (the private
// /tmp and /dev/shm exist only there), then the listener. INIT_UNIX_WALL
// says how the layer is enforced; the init reports it only if the layer
// was reported enforced (a wall that failed may have been degraded).
func (p *planner) unixWall() {
	flags, ok := p.try(LayerUnixSockets)
	if !ok {
		return
	}
	if ll := p.c.Landlock; ll != nil && ll.ABI >= landlock.ResolveUnixABI {
		p.layer(LayerUnixSockets)
		p.add(initUnixWall, nil, []byte(LayerUnixSockets), []byte(UnixWallLandlock))
		return
	}
	w := p.c.UnixWall
	for _, a := range w.Allowed {
		p.add(initWallRoot, nil, []byte(a))
	}
	first, fallback := listenerSteps(w.Filter)
	p.step(initWall, LayerUnixSockets, "wall off unix sockets", flags, []uint64{p.handoff()}, p.message(first), p.message(fallback))
	p.add(initUnixWall, nil, []byte(LayerUnixSockets), []byte(UnixWallNotify))
}

// EncodeCommand writes cmd as the command frame's payload. Args, Env,
// Roots and Refused travel as C strings, each followed by a NUL, so no
// string of cmd may hold one.
func EncodeCommand(cmd Command) ([]byte, error) {
	var err error
	str := func(field, s string) []byte {
		if strings.IndexByte(s, 0) >= 0 && err == nil {
			err = fmt.Errorf("nsinit: command %s %q holds a NUL", field, s)
		}
		return []byte(s)
	}
	list := func(field string, ss []string) []byte {
		var b []byte
		for _, s := range ss {
			b = append(append(b, str(field, s)...), 0)
		}
		return b
	}
	blobs := [][]byte{str("path", cmd.Path), str("dir", cmd.Dir), list("argument", cmd.Args), list("environment variable", cmd.Env), list("root", cmd.Roots), list("refused tree", cmd.Refused)}
	if err != nil {
		return nil, err
	}
	return EncodeWire(Record{Kind: cmdExec, Blobs: blobs})
}

// maxEvent bounds one event: the largest, the started event, lists a few
// dozen layers, skips and phases.
const maxEvent = 1 << 20

// ReadEvent reads the init's next event from r, its status pipe. p is the
// plan the init runs, whose filesystem step's mounts its errors name (nil:
// unknown). At the pipe's end it returns io.EOF.
func ReadEvent(r io.Reader, p *Plan) (Event, error) {
	hdr := make([]byte, wireHeader)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return Event{}, err
	}
	le := binary.LittleEndian
	n := le.Uint32(hdr[8:])
	if le.Uint32(hdr) != wireMagic || n < wireHeader || n > maxEvent {
		return Event{}, fmt.Errorf("%w: an event's header %x", ErrWire, hdr)
	}
	msg := append(hdr, make([]byte, n-wireHeader)...)
	if _, err := io.ReadFull(r, msg[wireHeader:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Event{}, err
	}
	recs, err := DecodeWire(msg)
	if err != nil {
		return Event{}, err
	}
	return p.event(recs)
}

// eventShapes are each event record's numbers of ints and blobs.
var eventShapes = map[uint16][2]int{
	evReady: {0, 0}, evStarted: {1, 0}, evLayer: {0, 1}, evSkipped: {0, 2}, evPhase: {2, 1},
	evUnixWall: {0, 1}, evExited: {1, 0}, evError: {4, 4},
}

// event reads one event's records.
func (p *Plan) event(recs []Record) (Event, error) {
	bad := func(why string, args ...any) (Event, error) {
		return Event{}, fmt.Errorf("%w: event: %s", ErrWire, fmt.Sprintf(why, args...))
	}
	if len(recs) == 0 {
		return bad("no records")
	}
	for _, r := range recs {
		s, ok := eventShapes[r.Kind]
		if !ok || len(r.Ints) != s[0] || len(r.Blobs) != s[1] {
			return bad("a record of kind %#x with %d ints and %d blobs", r.Kind, len(r.Ints), len(r.Blobs))
		}
	}
	var ev Event
	switch r := recs[0]; r.Kind {
	case evReady:
		ev.Kind = EventReady
	case evStarted:
		ev.Kind, ev.Pid = EventStarted, int(r.Ints[0])
	case evExited:
		ev.Kind = EventExited
		switch ws := unix.WaitStatus(uint32(r.Ints[0])); {
		case ws.Exited():
			ev.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			ev.ExitCode, ev.Signal = -1, int(ws.Signal())
		}
	case evError:
		ev.Kind, ev.Error = EventError, p.setupError(r)
	default:
		return bad("kind %#x first", r.Kind)
	}
	if len(recs) > 1 && ev.Kind != EventStarted {
		return bad("%d records after %s", len(recs)-1, ev.Kind)
	}
	for _, r := range recs[1:] {
		switch r.Kind {
		case evLayer:
			ev.Layers = append(ev.Layers, Layer(r.Blobs[0]))
		case evSkipped:
			ev.Skipped = append(ev.Skipped, Skipped{Layer: Layer(r.Blobs[0]), Reason: string(r.Blobs[1])})
		case evPhase:
			ev.Phases = append(ev.Phases, Phase{Name: string(r.Blobs[0]), Start: int64(r.Ints[0]), Nanos: int64(r.Ints[1])})
		case evUnixWall:
			ev.UnixWall = string(r.Blobs[0])
		default:
			return bad("kind %#x in a started event", r.Kind)
		}
	}
	return ev, nil
}

// initOpLayers are the layers of the init's own operations, which it
// reports by name alone (report_init_error, report_error): reading its
// configuration and entering the working directory are the filesystem's;
// the child's rlimits, the rlimits'; the rest concerns the command itself.
var initOpLayers = map[string]Layer{
	"read config":               LayerFilesystem,
	"chdir":                     LayerFilesystem,
	"set the command's rlimits": LayerRlimits,
	"read command":              LayerExec,
	OpLookPath:                  LayerExec,
	OpExec:                      LayerExec,
	"set up stdio":              LayerExec,
	"wait":                      LayerExec,
	"block signals":             LayerExec,
}

// setupError reads an EV_ERROR record: the layer and op of the plan's
// step (or the init's own), and what its executor said, worded as the
// executor's Go side words it (a *mounts.Error naming the plan's Mount, a
// *StepError) so that the host tells the same story whoever ran the step.
func (p *Plan) setupError(r Record) *SetupError {
	errno := syscall.Errno(r.Ints[0])
	index := int(int64(r.Ints[2]))
	detail := string(r.Blobs[2])
	se := &SetupError{Layer: Layer(r.Blobs[0]), Op: string(r.Blobs[1]), Path: string(r.Blobs[3])}
	if se.Layer == "" {
		// The init's own operations name no layer: Go decides.
		se.Layer = initOpLayers[se.Op]
	}
	var err error
	switch r.Ints[1] {
	case evExecMounts:
		var steps []mountStep
		if p != nil {
			steps = p.mounts
		}
		err = mountOutcome{failed: true, refused: r.Ints[3] != 0, index: index, op: detail, path: se.Path, errno: errno}.err(steps)
	case evExecSteps:
		// confine.c's errors carry no index: a refused message says so
		// in its op.
		err = &StepError{Op: detail, Path: se.Path, Errno: errno}
	default:
		switch {
		case errno == 0:
			err = errors.New(detail)
		case detail == "":
			err = errno
		default:
			err = fmt.Errorf("%s: %w", detail, errno)
		}
	}
	se.Msg = err.Error()
	var e syscall.Errno
	if errors.As(err, &e) {
		se.Errno = int(e)
	}
	return se
}
