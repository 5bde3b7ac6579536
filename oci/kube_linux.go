//go:build linux

package oci

// The subset of Kubernetes' API objects a Pod of hutch's uses, with
// Kubernetes' JSON field names (k8s.io/api/core/v1 and networking/v1).
// k8s.io/api itself is not linked: its init-time scheme registration
// and its size would be paid by every sandbox's start, which re-executes
// this binary. The tests validate what these make against the pinned
// Kubernetes OpenAPI schema, so a misspelled field does not go unseen.
//
// Booleans the manifest states on purpose (false included) have no
// omitempty: a reader sees hostNetwork: false, not its absence.

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type kubePod struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     podSpec    `json:"spec"`
}

type podSpec struct {
	RestartPolicy                string      `json:"restartPolicy"`
	ActiveDeadlineSeconds        *int64      `json:"activeDeadlineSeconds,omitempty"`
	AutomountServiceAccountToken bool        `json:"automountServiceAccountToken"`
	EnableServiceLinks           bool        `json:"enableServiceLinks"`
	HostNetwork                  bool        `json:"hostNetwork"`
	HostPID                      bool        `json:"hostPID"`
	HostIPC                      bool        `json:"hostIPC"`
	Hostname                     string      `json:"hostname,omitempty"`
	RuntimeClassName             string      `json:"runtimeClassName,omitempty"`
	Containers                   []container `json:"containers"`
	Volumes                      []volume    `json:"volumes,omitempty"`
}

type container struct {
	Name            string                `json:"name"`
	Image           string                `json:"image"`
	Command         []string              `json:"command"`
	WorkingDir      string                `json:"workingDir,omitempty"`
	Env             []envVar              `json:"env,omitempty"`
	Resources       *resourceRequirements `json:"resources,omitempty"`
	SecurityContext securityContext       `json:"securityContext"`
	VolumeMounts    []volumeMount         `json:"volumeMounts,omitempty"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// resourceRequirements are quantities by resource name ("memory", "cpu").
type resourceRequirements struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

type securityContext struct {
	RunAsNonRoot             bool           `json:"runAsNonRoot"`
	RunAsUser                int64          `json:"runAsUser"`
	RunAsGroup               int64          `json:"runAsGroup"`
	AllowPrivilegeEscalation bool           `json:"allowPrivilegeEscalation"`
	Privileged               bool           `json:"privileged"`
	ReadOnlyRootFilesystem   bool           `json:"readOnlyRootFilesystem"`
	Capabilities             capabilities   `json:"capabilities"`
	SeccompProfile           seccompProfile `json:"seccompProfile"`
}

type capabilities struct {
	Drop []string `json:"drop"`
}

type seccompProfile struct {
	Type             string `json:"type"`
	LocalhostProfile string `json:"localhostProfile,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	SubPath   string `json:"subPath,omitempty"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type volume struct {
	Name                  string           `json:"name"`
	HostPath              *hostPathSource  `json:"hostPath,omitempty"`
	EmptyDir              *emptyDirSource  `json:"emptyDir,omitempty"`
	PersistentVolumeClaim *claimSource     `json:"persistentVolumeClaim,omitempty"`
	ConfigMap             *configMapSource `json:"configMap,omitempty"`
}

type hostPathSource struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

type emptyDirSource struct {
	Medium    string `json:"medium,omitempty"`
	SizeLimit string `json:"sizeLimit,omitempty"`
}

type claimSource struct {
	ClaimName string `json:"claimName"`
}

type configMapSource struct {
	Name  string      `json:"name"`
	Items []keyToPath `json:"items"`
}

type keyToPath struct {
	Key  string `json:"key"`
	Path string `json:"path"`
	// Mode is a pointer: 0 (no access) is the point, not an absence.
	Mode *int32 `json:"mode,omitempty"`
}

type kubeConfigMap struct {
	typeMeta
	Metadata  objectMeta        `json:"metadata"`
	Immutable bool              `json:"immutable"`
	Data      map[string]string `json:"data"`
}

type kubeNetworkPolicy struct {
	typeMeta
	Metadata objectMeta        `json:"metadata"`
	Spec     networkPolicySpec `json:"spec"`
}

// networkPolicySpec without ingress or egress rules: with both policy
// types listed, the selected Pods may neither be reached nor reach out.
type networkPolicySpec struct {
	PodSelector labelSelector `json:"podSelector"`
	PolicyTypes []string      `json:"policyTypes"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// kubeSeccompProfile is the Security Profiles Operator's SeccompProfile
// (security-profiles-operator.x-k8s.io/v1beta1), cluster-scoped since
// the operator's v0.9.0: the operator writes its spec on every node as
// the kubelet's seccomp root's operator/NAME.json, the file a Pod's
// localhostProfile names. The fields are the operator's JSON names; the
// tests validate what these make against its published CRD schema.
type kubeSeccompProfile struct {
	typeMeta
	Metadata objectMeta         `json:"metadata"`
	Spec     seccompProfileSpec `json:"spec"`
}

// seccompProfileSpec is an OCI seccomp profile without its
// defaultErrnoRet, which the operator's type does not have.
type seccompProfileSpec struct {
	DefaultAction string           `json:"defaultAction"`
	Architectures []string         `json:"architectures,omitempty"`
	Flags         []string         `json:"flags,omitempty"`
	Syscalls      []seccompSyscall `json:"syscalls,omitempty"`
}

type seccompSyscall struct {
	Names  []string `json:"names"`
	Action string   `json:"action"`
	// ErrnoRet is a pointer: 0 is a value the operator takes.
	ErrnoRet *int32       `json:"errnoRet,omitempty"`
	Args     []seccompArg `json:"args,omitempty"`
}

// seccompArg's values are int64 in the operator's schema (at least 0):
// a uint64 above math.MaxInt64 has no form there.
type seccompArg struct {
	Index    uint32 `json:"index"`
	Value    int64  `json:"value,omitempty"`
	ValueTwo int64  `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}
