//go:build linux

package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"

	"github.com/hutchbox/hutch/mounts"
	"github.com/hutchbox/hutch/runtime"
	"github.com/hutchbox/hutch/seccomp"
)

// PodOptions are what Pod takes besides the policy.
type PodOptions struct {
	// Image is the container image the command runs in. Required: a
	// Pod's root is an image's, not the host's tree.
	Image string
	// Name names the Pod and the objects made for it; "" is
	// DefaultPodName. A DNS-1123 label: it is also a label's value.
	Name string
	// Namespace is the objects' namespace; "" leaves it to kubectl.
	Namespace string
	// RuntimeClass is the Pod's runtimeClassName, such as gvisor or kata;
	// "" is the cluster's default runtime.
	RuntimeClass string
	// WorkspaceClaim names a PersistentVolumeClaim mounted at the
	// workspace's path in place of the node's directory (a hostPath
	// volume), so that the Pod is not tied to one node.
	WorkspaceClaim string
	// RunAsUser and RunAsGroup are the uid and gid the command runs as;
	// 0 is 65534 (nobody): a Pod of hutch's never runs as root.
	RunAsUser, RunAsGroup int64
}

// DefaultPodName is the Pod's name when PodOptions.Name is "".
const DefaultPodName = "hutch-sandbox"

// DefaultPodUser is the uid and gid a Pod runs as by default: nobody.
const DefaultPodUser = 65534

// PodOptionError is a PodOptions field refused; Field is its name.
type PodOptionError struct {
	Field, Value, Reason string
}

// Error implements error.
func (e *PodOptionError) Error() string {
	return fmt.Sprintf("oci: pod %s %q: %s", e.Field, e.Value, e.Reason)
}

// Manifest is the Kubernetes form of a policy: a Pod and the objects it
// needs, and the seccomp profile the kubelet reads from each node.
type Manifest struct {
	// Objects are the API objects, each one YAML document, in the order
	// to apply them: the ConfigMap masked files are bound from, the
	// NetworkPolicy, then the Pod, which so never runs unconfined.
	Objects []any
	// Seccomp is the profile's JSON and SeccompFile its path under the
	// kubelet's seccomp root (the Pod's localhostProfile); both empty
	// when the policy skips seccomp.
	Seccomp     []byte
	SeccompFile string
	// SeccompProfile is the profile as the Security Profiles Operator's
	// SeccompProfile object (nil when Seccomp is): applied before the
	// Pod, the operator writes it on every node at SeccompFile.
	SeccompProfile any
	// Unexpressed says, one line each, what of the policy the Pod does
	// not enforce or enforces differently.
	Unexpressed []string
}

// The files Manifest.Write makes in its directory.
const (
	PodFile            = "pod.yaml"
	SeccompProfileFile = "seccompprofile.yaml" // Manifest.SeccompProfile
	SeccompDir         = "seccomp"             // a copy of the kubelet's seccomp root
)

// SeccompOperatorDir is where, under the kubelet's seccomp root, the
// Security Profiles Operator writes the profiles of its SeccompProfile
// objects, as NAME.json: the Pod's localhostProfile is there.
const SeccompOperatorDir = "operator"

// SeccompProfileAPIVersion is the apiVersion of the Pod form's
// SeccompProfile: the Security Profiles Operator serves it from v0.9.0
// (where the kind became cluster-scoped) to v1.0.0 and later.
const SeccompProfileAPIVersion = "security-profiles-operator.x-k8s.io/v1beta1"

// KubeletSeccompRoot is where the kubelet looks for localhost profiles
// by default (its --root-dir, /var/lib/kubelet, and seccomp).
const KubeletSeccompRoot = "/var/lib/kubelet/seccomp"

// The annotations that name on the Pod what it cannot enforce itself.
const (
	AnnotationMasks       = "hutch.dev/masks"     // every masked path, a JSON array
	AnnotationReadOnly    = "hutch.dev/read-only" // every read-only path inside a writable tree, a JSON array
	AnnotationPids        = "hutch.dev/pids-limit"
	AnnotationFileSize    = "hutch.dev/file-size-limit"
	AnnotationSeccomp     = "hutch.dev/seccomp-profile" // the profile's name, as Result.SeccompProfile
	AnnotationNetwork     = "hutch.dev/network"
	AnnotationUnexpressed = "hutch.dev/unexpressed" // Manifest.Unexpressed, a JSON array
	// LabelSandbox, the Pod's name, is what the NetworkPolicy selects.
	LabelSandbox = "hutch.dev/sandbox"
)

// Pod compiles r, a policy checked by runtime.Check, into the Kubernetes
// form of it running args in o.Image: the same mount plan, seccomp
// profile, environment and limits as Export. Paths are the host's: the workspace and the writable trees are
// the node's directories at the same paths, and what the plan masks or
// keeps read-only there is found in them now, on this host.
func Pod(r *runtime.Resolved, args []string, o PodOptions) (*Manifest, error) {
	if len(args) == 0 || args[0] == "" {
		return nil, errors.New("oci: no command given")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	v, err := compile(r)
	if err != nil {
		return nil, err
	}
	pol := v.Policy
	if err := unforwarded(pol); err != nil {
		return nil, err
	}
	m := &Manifest{}
	b := &podBuilder{o: o, at: map[string]int{}, hostVols: map[string]string{}, names: map[string]bool{}}
	if err := b.addMounts(v.Mounts, pol); err != nil {
		return nil, err
	}
	labels := map[string]string{"app.kubernetes.io/name": "hutch", LabelSandbox: o.Name}
	sc := seccompProfile{Type: "RuntimeDefault"}
	if v.Seccomp != nil {
		js, err := seccomp.Marshal(v.Seccomp)
		if err != nil {
			return nil, err
		}
		m.Seccomp = append(js, '\n')
		name := seccompProfileName(v.SeccompName, m.Seccomp)
		m.SeccompFile = SeccompOperatorDir + "/" + name + ".json"
		spec, err := operatorSeccomp(v.Seccomp)
		if err != nil {
			return nil, fmt.Errorf("oci: seccomp profile %s: %w", v.SeccompName, err)
		}
		m.SeccompProfile = &kubeSeccompProfile{
			typeMeta: typeMeta{APIVersion: SeccompProfileAPIVersion, Kind: "SeccompProfile"},
			// Cluster-scoped: no namespace; not the Pod's sandbox label,
			// as Pods of other names may share it.
			Metadata: objectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "hutch"}},
			Spec:     spec,
		}
		sc = seccompProfile{Type: "Localhost", LocalhostProfile: m.SeccompFile}
	}
	c := container{
		Name:       "sandbox",
		Image:      o.Image,
		Command:    args,
		WorkingDir: pol.Workspace,
		Env:        envVars(podEnv(v)),
		Resources:  podResources(v),
		SecurityContext: securityContext{
			RunAsNonRoot: true, RunAsUser: o.RunAsUser, RunAsGroup: o.RunAsGroup,
			AllowPrivilegeEscalation: false, Privileged: false, ReadOnlyRootFilesystem: true,
			Capabilities:   capabilities{Drop: []string{"ALL"}},
			SeccompProfile: sc,
		},
		VolumeMounts: b.mounts,
	}
	pod := &kubePod{
		typeMeta: typeMeta{APIVersion: "v1", Kind: "Pod"},
		Metadata: objectMeta{Name: o.Name, Namespace: o.Namespace, Labels: labels},
		Spec: podSpec{
			RestartPolicy:    "Never",
			RuntimeClassName: o.RuntimeClass,
			Containers:       []container{c},
			Volumes:          b.vols,
		},
	}
	if isDNS1123Label(v.Hostname) {
		pod.Spec.Hostname = v.Hostname
	}
	if pol.Timeout > 0 {
		// The kubelet counts whole seconds: rounded up, never shorter.
		s := int64((pol.Timeout + time.Second - 1) / time.Second)
		pod.Spec.ActiveDeadlineSeconds = &s
	}
	if b.maskVol != "" {
		m.Objects = append(m.Objects, &kubeConfigMap{
			typeMeta:  typeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			Metadata:  objectMeta{Name: b.maskConfigMap(), Namespace: o.Namespace, Labels: labels},
			Immutable: true,
			Data:      map[string]string{maskKey: ""},
		})
	}
	if pol.Network != runtime.NetworkHost {
		m.Objects = append(m.Objects, &kubeNetworkPolicy{
			typeMeta: typeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			Metadata: objectMeta{Name: o.Name, Namespace: o.Namespace, Labels: labels},
			Spec: networkPolicySpec{
				PodSelector: labelSelector{MatchLabels: map[string]string{LabelSandbox: o.Name}},
				PolicyTypes: []string{"Ingress", "Egress"},
			},
		})
	}
	m.Unexpressed = podUnexpressed(v, b, o)
	pod.Metadata.Annotations, err = podAnnotations(v, b, m.Unexpressed)
	if err != nil {
		return nil, err
	}
	m.Objects = append(m.Objects, pod)
	return m, nil
}

// dns1123Label is a DNS-1123 label's shape; isDNS1123Label checks its
// length too.
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// isDNS1123Label: up to 63 lower-case letters, digits and '-', starting
// and ending with a letter or digit, as Kubernetes names namespaces and
// as label values are (the Pod's name is one).
func isDNS1123Label(s string) bool { return len(s) <= 63 && dns1123Label.MatchString(s) }

// isDNS1123Subdomain: dot-separated labels, up to 253 characters in all,
// as Kubernetes names most objects (a RuntimeClass, a claim).
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !isDNS1123Label(l) {
			return false
		}
	}
	return true
}

// check fills in o's defaults and refuses what the API server would.
func (o *PodOptions) check() error {
	if strings.TrimSpace(o.Image) == "" {
		return &PodOptionError{"Image", o.Image, "required: a Pod's root is a container image, not the host's tree"}
	}
	if strings.TrimSpace(o.Image) != o.Image {
		return &PodOptionError{"Image", o.Image, "has leading or trailing space"}
	}
	if o.Name == "" {
		o.Name = DefaultPodName
	}
	const label = "not a DNS-1123 label (up to 63 lower-case letters, digits and '-', starting and ending with a letter or digit)"
	const subdomain = "not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"
	for _, f := range []struct {
		field, v, reason string
		ok               func(string) bool
	}{
		{"Name", o.Name, label, isDNS1123Label},
		{"Namespace", o.Namespace, label, isDNS1123Label},
		{"RuntimeClass", o.RuntimeClass, subdomain, isDNS1123Subdomain},
		{"WorkspaceClaim", o.WorkspaceClaim, subdomain, isDNS1123Subdomain},
	} {
		if f.v != "" && !f.ok(f.v) {
			return &PodOptionError{f.field, f.v, f.reason}
		}
	}
	for _, f := range []struct {
		field string
		id    *int64
	}{{"RunAsUser", &o.RunAsUser}, {"RunAsGroup", &o.RunAsGroup}} {
		switch {
		case *f.id == 0:
			*f.id = DefaultPodUser
		case *f.id < 0 || *f.id > math.MaxInt32:
			return &PodOptionError{f.field, strconv.FormatInt(*f.id, 10), "not an id Kubernetes takes (1 to 2147483647)"}
		}
	}
	return nil
}

// maskKey is the key of the empty file masked files are bound from.
const maskKey = "empty"

// podBuilder turns a mount plan into the container's volumes and mounts.
type podBuilder struct {
	o      PodOptions
	vols   []volume
	mounts []volumeMount
	at     map[string]int  // mount path -> index in mounts
	names  map[string]bool // volume names taken
	// hostVols are the volumes holding host trees, by host path: what
	// lies inside them is mounted from them, by subPath.
	hostVols          map[string]string
	tmpSize           int64
	emptyVol, maskVol string
	// What the mounts could not say, for Unexpressed.
	masks, readOnly []string // every mask, every read-only path
	unmounted       []string // masks of paths missing now
	dirMasks        int
	privateReadOnly []string // read-only paths in a private tmpfs
	nodePaths       []string // the node's trees, hostPath volumes
	claimed         string   // the workspace, when a claim holds it
	privateHome     string   // HOME, when an emptyDir of its own
}

// volume adds a volume named base (or base-2, ...) and returns its name.
func (b *podBuilder) volume(base string, v volume) string {
	name := base
	for i := 2; b.names[name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	b.names[name] = true
	v.Name = name
	b.vols = append(b.vols, v)
	return name
}

// mount mounts volume vol (its subPath, if any) at path. A later mount
// at the same path replaces the earlier, as in the plan.
func (b *podBuilder) mount(path, vol, subPath string, readOnly bool) {
	vm := volumeMount{Name: vol, MountPath: path, SubPath: subPath, ReadOnly: readOnly}
	if i, ok := b.at[path]; ok {
		b.mounts[i] = vm
		return
	}
	b.at[path] = len(b.mounts)
	b.mounts = append(b.mounts, vm)
}

// empty is the volume of empty read-only directories: one emptyDir,
// mounted read-only wherever the plan hides a directory.
func (b *podBuilder) empty() string {
	if b.emptyVol == "" {
		b.emptyVol = b.volume("empty", volume{EmptyDir: &emptyDirSource{Medium: "Memory", SizeLimit: "4Ki"}})
	}
	return b.emptyVol
}

// maskFile is the volume of the empty file masked files are bound from:
// a ConfigMap's key written by the kubelet as root, mode 0000, which a
// command without capabilities cannot open, as hutch's masks.
func (b *podBuilder) maskFile() string {
	if b.maskVol == "" {
		mode := int32(0)
		b.maskVol = b.volume("mask", volume{ConfigMap: &configMapSource{
			Name: b.maskConfigMap(), Items: []keyToPath{{Key: maskKey, Path: maskKey, Mode: &mode}},
		}})
	}
	return b.maskVol
}

func (b *podBuilder) maskConfigMap() string { return b.o.Name + "-mask" }

// hostTree is the volume holding host path p and p's path in it.
func (b *podBuilder) hostTree(p string) (vol, rel string, ok bool) {
	best := ""
	for src := range b.hostVols {
		if mounts.Within(p, src) && len(src) > len(best) {
			best = src
		}
	}
	if best == "" {
		return "", "", false
	}
	rel, _ = filepath.Rel(best, p)
	if rel == "." {
		rel = ""
	}
	return b.hostVols[best], rel, true
}

// addMounts turns hutch's mount plan into volumes and mounts, in the
// plan's order; the runtime mounts them parents first (containerd and
// CRI-O sort by depth), as the plan does. Pins, read-only paths and masks
// inside the host's trees are mounts of those trees' volumes (subPath),
// where the path exists now: the kubelet would create a missing one on
// the node.
func (b *podBuilder) addMounts(plan mounts.Plan, pol runtime.Policy) error {
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	for i, m := range plan.Mounts {
		// The view at m.Target before this step.
		before := placeBefore(plan, i, m.Target)
		vol, rel, inHost := b.hostTree(before.HostPath)
		inHost = inHost && before.Reach == mounts.OnHost
		switch m.Kind {
		case mounts.HostRoot, mounts.Dev, mounts.Proc:
			// The image's root, read-only (readOnlyRootFilesystem); the
			// runtime's /dev and /proc, its kernel interfaces masked.
		case mounts.File:
			// The sandbox's /etc/hosts naming its hostname: the kubelet
			// writes a Pod's, naming the Pod's.
		case mounts.EmptyRoot, mounts.Symlink:
			return fmt.Errorf("oci: a listed view (Reads listed) has no Pod form: a Pod's root is its image, and the listed trees are the host's")
		case mounts.Tmpfs:
			b.tmpSize = m.SizeBytes
			b.mount(m.Target, b.volume("tmp", b.memoryDir()), "", false)
		case mounts.Dir:
			// HOME in the private /tmp: an emptyDir of its own, as a
			// directory the kubelet made in /tmp's (subPath) would be
			// root's and not the command's to write. Only the deepest
			// directory: the runtime makes the mount point's parents.
			// One a tree is bound on is that tree (a Home under /tmp).
			deeper := slices.ContainsFunc(plan.Mounts[i+1:], func(n mounts.Mount) bool {
				return n.Target != m.Target && mounts.Within(n.Target, m.Target)
			})
			if before.Reach == mounts.Private && !deeper {
				b.privateHome = m.Target
				b.mount(m.Target, b.volume("home", b.memoryDir()), "", false)
			}
		case mounts.EmptyRO:
			if before.Reach != mounts.Masked && (!inHost || exists(before.HostPath)) {
				b.mount(m.Target, b.empty(), "", true)
			}
		case mounts.BindRW, mounts.BindRO:
			fi, err := os.Stat(m.Source)
			if err != nil {
				if m.Optional {
					continue
				}
				return fmt.Errorf("oci: %s: %s does not exist", m.Kind, m.Source)
			}
			ro := m.Kind == mounts.BindRO
			claimed := m.Source == pol.Workspace && b.o.WorkspaceClaim != ""
			if !claimed && b.o.WorkspaceClaim != "" && mounts.Within(m.Source, pol.Workspace) && b.hostVols[pol.Workspace] == "" {
				// An app's directory in its hidden workspace: a
				// subPath of the claim, the workspace itself unmounted.
				b.hostVols[pol.Workspace] = b.hostVolume(pol.Workspace, true, pol)
			}
			if vol, rel, ok := b.hostTree(m.Source); ok && !claimed {
				b.mount(m.Target, vol, rel, ro)
				continue
			}
			b.hostVols[m.Source] = b.hostVolume(m.Source, fi.IsDir(), pol)
			b.mount(m.Target, b.hostVols[m.Source], "", ro)
		case mounts.Pin:
			// A mount point cannot be renamed: a subPath mount of the
			// directory onto itself pins it as hutch's bind does.
			if inHost && rel != "" && exists(before.HostPath) {
				b.mount(m.Target, vol, rel, false)
			}
		case mounts.ReadOnly:
			b.readOnly = append(b.readOnly, m.Target)
			switch j, ok := b.at[m.Target]; {
			case ok:
				b.mounts[j].ReadOnly = true
			case inHost:
				if exists(before.HostPath) {
					b.mount(m.Target, vol, rel, true)
				}
			case before.Reach == mounts.Private:
				b.privateReadOnly = append(b.privateReadOnly, m.Target)
			}
			// Elsewhere it is in the image's read-only root already.
		case mounts.Mask:
			b.masks = append(b.masks, m.Target)
			if before.Reach != mounts.OnHost {
				continue // hidden already, or in a private tmpfs, empty at the start
			}
			fi, err := os.Lstat(before.HostPath)
			switch {
			case err != nil:
				b.unmounted = append(b.unmounted, m.Target)
			case fi.IsDir():
				b.dirMasks++
				b.mount(m.Target, b.empty(), "", true)
			default:
				b.mount(m.Target, b.maskFile(), maskKey, true)
			}
		default:
			return fmt.Errorf("oci: mount plan step %s has no Pod form", m)
		}
	}
	return nil
}

// memoryDir is a tmpfs emptyDir with the private /tmp's size.
func (b *podBuilder) memoryDir() volume {
	e := &emptyDirSource{Medium: "Memory"}
	if b.tmpSize > 0 {
		e.SizeLimit = bytesQuantity(b.tmpSize)
	}
	return volume{EmptyDir: e}
}

// hostVolume adds the volume of the host tree at path: the workspace's
// claim if o names one, the node's directory (or file) otherwise.
func (b *podBuilder) hostVolume(path string, dir bool, pol runtime.Policy) string {
	base := "write"
	switch path {
	case pol.Workspace:
		base = "workspace"
		if b.o.WorkspaceClaim != "" {
			b.claimed = path
			return b.volume(base, volume{PersistentVolumeClaim: &claimSource{ClaimName: b.o.WorkspaceClaim}})
		}
	case pol.Home:
		base = "home"
	}
	t := "Directory"
	if !dir {
		t = "File"
	}
	b.nodePaths = append(b.nodePaths, path)
	return b.volume(base, volume{HostPath: &hostPathSource{Path: path, Type: t}})
}

// seccompProfileName names the profile's SeccompProfile object, and so
// its file: its name and a digest of its content, so that the profiles
// of two policies, or of two versions of hutch, never take each other's
// place in a cluster. A DNS-1123 subdomain, as the object's name must be.
func seccompProfileName(name string, js []byte) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, name)
	safe = strings.Trim(safe[:min(len(safe), 60)], "-")
	if !strings.HasPrefix(safe, "hutch") {
		safe = strings.Trim("hutch-"+safe, "-")
	}
	sum := sha256.Sum256(js)
	return safe + "-" + hex.EncodeToString(sum[:6])
}

// operatorFlags are the filter flags the operator's type takes.
var operatorFlags = []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"}

// operatorSeccomp is p as a SeccompProfile's spec: the same rules, less
// the default errno (said in podUnexpressed). What the operator's type
// cannot hold is refused, never dropped.
func operatorSeccomp(p *seccomp.Profile) (seccompProfileSpec, error) {
	if p.ListenerPath != "" {
		return seccompProfileSpec{}, fmt.Errorf("a listener path (%s) has no SeccompProfile form", p.ListenerPath)
	}
	s := seccompProfileSpec{DefaultAction: string(p.DefaultAction)}
	for _, a := range p.Architectures {
		s.Architectures = append(s.Architectures, string(a))
	}
	for _, f := range p.Flags {
		if !slices.Contains(operatorFlags, f) {
			return seccompProfileSpec{}, fmt.Errorf("flag %s has no SeccompProfile form (it takes %v)", f, operatorFlags)
		}
		s.Flags = append(s.Flags, string(f))
	}
	for _, c := range p.Syscalls {
		out := seccompSyscall{Names: c.Names, Action: string(c.Action)}
		if c.ErrnoRet != nil {
			if *c.ErrnoRet > math.MaxInt32 {
				return seccompProfileSpec{}, fmt.Errorf("%v: errno %d has no SeccompProfile form (an int32)", c.Names, *c.ErrnoRet)
			}
			e := int32(*c.ErrnoRet)
			out.ErrnoRet = &e
		}
		for _, a := range c.Args {
			if a.Value > math.MaxInt64 || a.ValueTwo > math.MaxInt64 || a.Index > math.MaxInt32 {
				return seccompProfileSpec{}, fmt.Errorf("%v: argument %d's values %#x, %#x have no SeccompProfile form (int64s)", c.Names, a.Index, a.Value, a.ValueTwo)
			}
			out.Args = append(out.Args, seccompArg{Index: uint32(a.Index), Value: int64(a.Value), ValueTwo: int64(a.ValueTwo), Op: string(a.Op)})
		}
		s.Syscalls = append(s.Syscalls, out)
	}
	return s, nil
}

// podEnv is the environment of a Pod's command: the view's, less what
// it takes from the exporter's (its PATH, locale, terminal, user): the
// image has its own, and the runtime gives the command the image's
// where the Pod sets none. With Tools, PATH is Tools before
// podSystemPath.
func podEnv(v view) []string {
	var out []string
	for _, kv := range v.Env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case !slices.Contains(v.HostEnv, k):
			out = append(out, kv)
		case k == "PATH" && v.Policy.Tools != "":
			out = append(out, "PATH="+v.Policy.Tools+":"+podSystemPath)
		}
	}
	return out
}

// homeOf is HOME in env.
func homeOf(env []string) string {
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			return h
		}
	}
	return ""
}

// envVars are KEY=VALUE pairs as a container's env.
func envVars(env []string) []envVar {
	var out []envVar
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, envVar{Name: k, Value: v})
	}
	return out
}

// podResources are the memory and CPU limits, requested as much as
// limited: the scheduler places the Pod where they are free, and with
// both the Pod is Guaranteed, the last to be evicted. nil when there are
// none.
func podResources(v view) *resourceRequirements {
	l := map[string]string{}
	if v.Limits.MemoryBytes > 0 {
		l["memory"] = bytesQuantity(v.Limits.MemoryBytes)
	}
	if v.Limits.CPUs > 0 {
		l["cpu"] = cpuQuantity(v.Limits.CPUs)
	}
	if len(l) == 0 {
		return nil
	}
	req := map[string]string{}
	for k, q := range l {
		req[k] = q
	}
	return &resourceRequirements{Limits: l, Requests: req}
}

// bytesQuantity is n bytes as a Kubernetes quantity, with the largest
// binary suffix that divides it (512Mi, 1536Mi, 4097).
func bytesQuantity(n int64) string {
	for _, s := range []struct {
		suffix string
		shift  uint
	}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if n >= 1<<s.shift && n%(1<<s.shift) == 0 {
			return strconv.FormatInt(n>>s.shift, 10) + s.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// cpuQuantity is a rate in cores as a Kubernetes quantity, in whole
// millicores, rounded up (Kubernetes' precision): 1.5 is 1500m. The
// rounding to a micro-core first keeps 0.1 (0.1000000000001 in binary)
// at 100m.
func cpuQuantity(cores float64) string {
	m := int64(math.Ceil(math.Round(cores*1e6) / 1e3))
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// podAnnotations name on the Pod what its fields cannot hold: every
// mask and read-only path, the limits without a Pod field, the seccomp
// profile's name, the network mode and what is not expressed.
func podAnnotations(v view, b *podBuilder, unexpressed []string) (map[string]string, error) {
	// The network mode is resolved: "" is none already.
	a := map[string]string{AnnotationNetwork: string(v.Policy.Network)}
	for k, list := range map[string][]string{AnnotationMasks: b.masks, AnnotationReadOnly: b.readOnly, AnnotationUnexpressed: unexpressed} {
		if len(list) == 0 {
			continue
		}
		js, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		a[k] = string(js)
	}
	if v.Limits.Pids > 0 {
		a[AnnotationPids] = strconv.FormatInt(v.Limits.Pids, 10)
	}
	if v.Limits.FileSizeBytes > 0 {
		a[AnnotationFileSize] = strconv.FormatInt(v.Limits.FileSizeBytes, 10)
	}
	if v.Seccomp != nil {
		a[AnnotationSeccomp] = v.SeccompName
	}
	return a, nil
}

// podUnexpressed lists what hutch enforces for the policy of view v that
// its Pod, as b built it, does not, or does differently.
func podUnexpressed(v view, b *podBuilder, o PodOptions) []string {
	p := v.Policy
	ids := strconv.FormatInt(o.RunAsUser, 10) + ":" + strconv.FormatInt(o.RunAsGroup, 10)
	out := []string{
		"root: the image " + o.Image + ", read-only, not the host's tree: what the command reads outside the workspace and the writable trees is the image's",
		"landlock: no Landlock ruleset in a Pod; its mounts alone are the filesystem boundary",
		"user namespace: none asked for (hostUsers is left unset); the command runs as " + ids + " with no capabilities, and a runtime class such as gvisor or kata puts a kernel of its own between it and the node's",
		"unix sockets: no socket wall; a unix socket in a mounted tree of the node's can be connected to",
		"deny names and git guards: the matches and repositories in the writable trees at export, on this host, are masked and guarded; ones made later are not",
		"leak scanning and the output limit: hutch-side; not in a Pod",
		"pid 1: the command is pid 1 of its container, where signals it has no handler for (SIGTERM, SIGINT) do not end it",
		podNetwork[p.Network],
	}
	// Masks of the exporter's home are the host's idea of secrets: the
	// deny-list's ~ is the home of whoever exported.
	home, _ := os.UserHomeDir()
	var homeMasks []string
	for _, m := range b.masks {
		if home != "" && home != "/" && mounts.Within(m, home) {
			homeMasks = append(homeMasks, m)
		}
	}
	var rl []string
	for _, r := range v.Rlimits {
		rl = append(rl, rlimitName(r.Resource)+" "+strconv.FormatUint(r.Hard, 10))
	}
	for _, c := range []struct {
		when bool
		line func() string // made only when it applies
	}{
		{o.RuntimeClass != "" && v.Seccomp != nil, func() string {
			return "runtime class " + o.RuntimeClass + ": where its handler is gVisor (runsc), the Pod's seccomp profile holds only with oci-seccomp = \"true\" in the nodes' runsc.toml; without it runsc runs the command with no filter, and says nothing"
		}},
		{b.privateHome != "", func() string {
			return "HOME (" + b.privateHome + ") is an emptyDir of its own in /tmp's, its size counted apart"
		}},
		{len(b.nodePaths) > 0, func() string {
			return "hostPath: the node's " + strings.Join(b.nodePaths, ", ") + ", at the same paths: the Pod must be scheduled where they are (it is not pinned to a node here), and its namespace must allow hostPath volumes (Pod Security level privileged)"
		}},
		{b.claimed != "", func() string {
			return "workspace: the claim " + o.WorkspaceClaim + " is mounted at " + b.claimed + "; the deny-name matches and git guards in it were found in this host's " + b.claimed + ", which must hold the same tree"
		}},
		{len(b.masks) > 0, func() string {
			return "masks are files or directories as on this host at export; where the image or a volume differs, the container does not start"
		}},
		{b.dirMasks > 0, func() string {
			return "masked directories are empty read-only directories a command can list; hutch's cannot be entered"
		}},
		{len(homeMasks) > 0, func() string {
			return "masks under the exporter's home (" + home + "): " + strings.Join(homeMasks, ", ") + ": that home's paths, which the image may not have (the runtime makes a mount point there) or have as another type (the container does not start); the command's HOME is " + homeOf(v.Env)
		}},
		{len(b.unmounted) > 0, func() string {
			return "masks of paths missing at export are not mounted over (a Pod's mount needs to know file from directory): " + strings.Join(b.unmounted, ", ")
		}},
		{len(b.privateReadOnly) > 0, func() string {
			return "read-only paths in the private /tmp are writable in the Pod: " + strings.Join(b.privateReadOnly, ", ")
		}},
		{v.Limits.Pids > 0, func() string {
			return "pids: Kubernetes bounds a Pod's processes only node-wide (the kubelet's podPidsLimit); the policy's " + strconv.FormatInt(v.Limits.Pids, 10) + " is the annotation " + AnnotationPids
		}},
		{len(rl) > 0, func() string {
			return "rlimits: a Pod sets none, so the runtime's defaults apply in place of the policy's " + strings.Join(rl, ", ")
		}},
		{p.Timeout > 0 && p.Timeout%time.Second != 0, func() string {
			return "timeout: " + p.Timeout.String() + " is rounded up to whole seconds (activeDeadlineSeconds)"
		}},
		{v.ModeWall, func() string {
			return "seccomp mode wall: hutch stacks its no-setuid-file rules under a caller's profile; a Pod takes one profile, so only the caller's applies"
		}},
		{p.Tools != "" && slices.Contains(v.HostEnv, "PATH"), func() string {
			return "PATH: Tools (" + p.Tools + ") before " + podSystemPath + ", in place of the image's PATH, which is not known at export"
		}},
		{v.Seccomp == nil, func() string {
			return "seccomp: skipped by the policy; the Pod gets the runtime's default profile (RuntimeDefault)"
		}},
		{v.Seccomp != nil && v.Seccomp.DefaultErrnoRet != nil && *v.Seccomp.DefaultErrnoRet != uint(unix.EPERM), func() string {
			return "seccomp: the SeccompProfile has no default errno (the operator's type has no defaultErrnoRet): a system call the profile does not name fails with EPERM, where hutch's fails with " +
				unix.ErrnoName(unix.Errno(*v.Seccomp.DefaultErrnoRet)) + "; the profile under " + SeccompDir + "/, copied to the nodes by hand, keeps it"
		}},
	} {
		if c.when {
			out = append(out, c.line())
		}
	}
	return out
}

// podNetwork is what a Pod makes of each network mode.
var podNetwork = map[runtime.NetworkMode]string{
	runtime.NetworkNone:  "network none: a Pod always has a network; its NetworkPolicy denies all ingress and egress, which only a CNI that enforces NetworkPolicy (Calico, Cilium, ...) applies",
	runtime.NetworkAllow: "network allow: a NetworkPolicy selects addresses, not domain names, so the allow-list and the egress proxy are hutch's alone; the Pod's NetworkPolicy denies all ingress and egress (a CNI that enforces NetworkPolicy is needed)",
	runtime.NetworkHost:  "network host: the Pod's own network, unrestricted (no NetworkPolicy); hostNetwork is not set",
}

// YAML is the manifest's objects as one YAML stream, a document each.
func (m *Manifest) YAML() ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range m.Objects {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

// Write writes the manifest into dir: dir/pod.yaml; with a seccomp
// profile, dir/seccompprofile.yaml, the Security Profiles Operator's
// object to apply first, and the profile itself at dir/seccomp/SeccompFile,
// a tree to copy into each node's kubelet seccomp root
// (KubeletSeccompRoot) where the operator is not installed.
func (m *Manifest) Write(dir string) error {
	y, err := m.YAML()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("oci: pod manifest %q: %w", dir, err)
	}
	if m.Seccomp != nil {
		prof := filepath.Join(dir, SeccompDir, filepath.FromSlash(m.SeccompFile))
		if err := os.MkdirAll(filepath.Dir(prof), 0o755); err != nil {
			return fmt.Errorf("oci: pod manifest %q: %w", dir, err)
		}
		if err := os.WriteFile(prof, m.Seccomp, 0o644); err != nil {
			return fmt.Errorf("oci: pod manifest %q: %w", dir, err)
		}
	}
	if m.SeccompProfile != nil {
		y, err := yaml.Marshal(m.SeccompProfile)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, SeccompProfileFile), y, 0o644); err != nil {
			return fmt.Errorf("oci: pod manifest %q: %w", dir, err)
		}
	}
	return os.WriteFile(filepath.Join(dir, PodFile), y, 0o644)
}

// podSystemPath is the PATH a Pod's command gets with Tools: Tools
// before it. The image's own PATH is not known here, and the
// exporter's is not the image's.
const podSystemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
