//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/runtime"
)

// ociCommand is hutch oci export: the OCI form of the policy run's flags
// make, or with --kubernetes its Pod form.
func ociCommand(code *int) *cobra.Command {
	c := &cobra.Command{Use: "oci", Short: "The OCI form of a policy (config.json for runc, crun, runsc; a Kubernetes Pod)"}
	f := newRunFlags()
	var bundle, jsonOut string
	var kube, rootless bool
	var pod oci.PodOptions
	export := &cobra.Command{
		Use:   "export --bundle DIR [--kubernetes --image IMAGE] [flags] -- CMD ARGS...",
		Short: "Write the policy run's flags make as an OCI bundle, or a Kubernetes Pod, running CMD",
		Long: `Write the policy run's flags make as an OCI bundle: DIR/config.json with
its namespaces, mounts, masked and read-only paths, seccomp profile, rlimits,
cgroup resources, no capabilities and no new privileges, and DIR/rootfs.

With the host's tree as the root (no --rootfs), DIR/rootfs must hold / bound
read-only when the runtime starts; hutch run --backend oci does that itself.

With --kubernetes, write instead DIR/pod.yaml, a Pod running CMD in --image
(with a NetworkPolicy denying all traffic but for --net host, and a
ConfigMap masked files are bound from) with the image's environment and the
policy's, not this host's; its seccomp profile as the Security Profiles
Operator's SeccompProfile in DIR/seccompprofile.yaml, to apply first; and
the profile itself under DIR/seccomp/, to copy into each node's
` + oci.KubeletSeccompRoot + ` where the operator is not installed.

What the form does not express of the policy is listed on stderr, one
line each (and with --unexpressed-json, as a JSON array).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "" {
				return errors.New("oci export: no command given (hutch oci export --bundle DIR [flags] -- CMD ARGS...)")
			}
			if bundle == "" {
				files := "the bundle"
				if kube {
					files = "pod.yaml and seccomp/"
				}
				return &flagErr{"--bundle", "", "required: the directory to write " + files + " to"}
			}
			if err := checkPodFlags(cmd, kube); err != nil {
				return err
			}
			p, err := policyFrom(f)
			if err != nil {
				return err
			}
			// The bundle's root is the image's (--rootfs), which the
			// runtime shows itself: not a root for hutch's own view.
			rootfs := p.Root
			p.Root = ""
			r, err := checkedForOCI(p)
			if err != nil {
				return f.flagError(err)
			}
			var unexpressed []string
			what := "OCI form"
			if kube {
				m, err := oci.Pod(r, args, pod)
				if err != nil {
					return podFlagError(f.flagError(err))
				}
				if err := m.Write(bundle); err != nil {
					return err
				}
				what, unexpressed = "Pod", m.Unexpressed
				if m.SeccompFile != "" {
					fmt.Fprintf(os.Stderr, "hutch: the Pod's seccomp profile is the SeccompProfile in %s: apply it before the Pod (kubectl apply -f %s), and the Security Profiles Operator writes it to %s on every node; without the operator, copy %s there on every node (cp -r %s/. %s/)\n",
						filepath.Join(bundle, oci.SeccompProfileFile), filepath.Join(bundle, oci.SeccompProfileFile), filepath.Join(oci.KubeletSeccompRoot, m.SeccompFile),
						filepath.Join(bundle, oci.SeccompDir, m.SeccompFile), filepath.Join(bundle, oci.SeccompDir), oci.KubeletSeccompRoot)
				}
			} else {
				form, err := oci.Export(r, args, oci.Options{Rootfs: rootfs, Rootless: rootless})
				if err != nil {
					return f.flagError(err)
				}
				if err := form.Write(bundle); err != nil {
					return err
				}
				unexpressed = form.Unexpressed
				abs, err := filepath.Abs(bundle)
				if err != nil {
					return err
				}
				// What each runtime needs beyond config.json: its flags
				// (also in the configuration's annotations) and notes.
				for _, rt := range oci.Runtimes {
					fmt.Fprintf(os.Stderr, "hutch: to run it under %s: %s\n", rt, strings.Join(form.RuntimeCommand(rt, abs, "hutch"), " "))
					for _, n := range form.RuntimeNotes(rt) {
						fmt.Fprintf(os.Stderr, "hutch:   %s: %s\n", rt, n)
					}
				}
			}
			for _, u := range unexpressed {
				fmt.Fprintf(os.Stderr, "hutch: not in the %s: %s\n", what, u)
			}
			if jsonOut != "" {
				b, err := json.MarshalIndent(unexpressed, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("--unexpressed-json %q: %w", jsonOut, err)
				}
			}
			return nil
		},
	}
	fl := export.Flags()
	fl.SetInterspersed(false)
	// Before the run flags, which then leave --image to the Pod.
	fl.StringVar(&pod.Image, "image", "", "with --kubernetes: the container image to run in (required)")
	addRunFlags(fl, &f)
	fl.StringVar(&bundle, "bundle", "", "the directory to write (config.json, rootfs; with --kubernetes pod.yaml, seccomp/)")
	fl.StringVar(&jsonOut, "unexpressed-json", "", "also write what the form does not express, as a JSON array of lines, to this file")
	fl.BoolVar(&rootless, "rootless", os.Geteuid() != 0, "a bundle for a rootless runtime (runc): a user namespace mapping only your uid and gid to 0, no cgroup (the limits as rlimits), the host's root bound by config.json itself (default: when run by a user other than root)")
	fl.BoolVar(&kube, "kubernetes", false, "write a Kubernetes Pod manifest and its seccomp profile instead of an OCI bundle")
	fl.StringVar(&pod.RuntimeClass, "runtime-class", "", "with --kubernetes: the Pod's runtimeClassName (gvisor, kata, ...)")
	fl.StringVar(&pod.Name, "pod-name", oci.DefaultPodName, "with --kubernetes: the Pod's name")
	fl.StringVar(&pod.Namespace, "namespace", "", "with --kubernetes: the objects' namespace")
	fl.StringVar(&pod.WorkspaceClaim, "workspace-claim", "", "with --kubernetes: a PersistentVolumeClaim mounted at the workspace's path instead of the node's directory")
	fl.Int64Var(&pod.RunAsUser, "run-as-user", oci.DefaultPodUser, "with --kubernetes: the uid the command runs as (not 0)")
	fl.Int64Var(&pod.RunAsGroup, "run-as-group", oci.DefaultPodUser, "with --kubernetes: the gid the command runs as (not 0)")
	c.AddCommand(export)
	return c
}

// checkedForOCI is p checked for an OCI runtime (runtime.BackendOCI),
// unless --backend named one of hutch's own.
func checkedForOCI(p runtime.Policy) (*runtime.Resolved, error) {
	if p.Backend == "" || p.Backend == runtime.BackendAuto {
		p.Backend = runtime.BackendOCI
	}
	return runtime.Check(p)
}

// podFlags are oci export's flags for the Pod form, by the PodOptions
// field each sets.
var podFlags = map[string]string{
	"Image": "--image", "RuntimeClass": "--runtime-class", "Name": "--pod-name", "Namespace": "--namespace",
	"WorkspaceClaim": "--workspace-claim", "RunAsUser": "--run-as-user", "RunAsGroup": "--run-as-group",
}

// checkPodFlags refuses the Pod form's flags without --kubernetes, the
// OCI form's with it, and a root uid or gid, which PodOptions would
// take for its default.
func checkPodFlags(cmd *cobra.Command, kube bool) error {
	fl := cmd.Flags()
	if !kube {
		for _, name := range slices.Sorted(maps.Values(podFlags)) {
			if fl.Changed(name[2:]) {
				return &flagErr{name, fl.Lookup(name[2:]).Value.String(), "only with --kubernetes"}
			}
		}
		return nil
	}
	if fl.Changed("rootfs") {
		return &flagErr{"--rootfs", fl.Lookup("rootfs").Value.String(), "not with --kubernetes: a Pod's root is --image"}
	}
	if fl.Changed("rootless") {
		return &flagErr{"--rootless", fl.Lookup("rootless").Value.String(), "not with --kubernetes: a Pod's user namespace and cgroups are the cluster's"}
	}
	for _, name := range []string{"run-as-user", "run-as-group"} {
		if v := fl.Lookup(name).Value.String(); v == "0" {
			return &flagErr{"--" + name, v, "root: a Pod of hutch's runs as a user other than root"}
		}
	}
	return nil
}

// podFlagError names the flag of a PodOptions field refused.
func podFlagError(err error) error {
	var pe *oci.PodOptionError
	if errors.As(err, &pe) {
		return &flagErr{podFlags[pe.Field], pe.Value, pe.Reason}
	}
	return err
}

// runOCI runs args through the OCI runtime f.ociRuntime names, with the
// OCI form of p. Signals hutch gets go to the runtime, which passes them
// on: ctx's cancellation by them does not kill the runtime.
func runOCI(ctx context.Context, f runFlags, p runtime.Policy, args []string, killAfter time.Duration, code *int) (*runtime.Result, error) {
	if f.ociRuntime == "" {
		*code = exitNotFound
		return nil, &flagErr{"--backend", "oci", "needs --oci-runtime (one of " + fmt.Sprint(oci.Runtimes) + ")"}
	}
	path, err := oci.LookRuntime(f.ociRuntime)
	if errors.Is(err, runtime.ErrBackendUnavailable) {
		*code = exitNotFound
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	checked, err := checkedForOCI(p)
	if err != nil {
		return nil, f.flagError(err)
	}
	// A user other than root runs a rootless form, where the runtime can.
	form, err := oci.Export(checked, args, oci.Options{Rootless: os.Geteuid() != 0})
	if err != nil {
		return nil, f.flagError(err)
	}
	form.Grace = killAfter
	r, err := oci.Run(context.WithoutCancel(ctx), form, path, oci.Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if errors.Is(err, runtime.ErrBackendUnavailable) {
		*code = exitNotFound
	}
	if err != nil {
		// A limit the runtime cannot run with names its flag.
		return r, f.flagError(err)
	}
	*code = r.ExitCode
	fmt.Fprintf(os.Stderr, "hutch: backend oci (%s); not enforced: %s\n", f.ociRuntime, strings.Join(r.Unenforced, "; "))
	if r.Reason != "" {
		fmt.Fprintf(os.Stderr, "hutch: command killed: %s\n", r.Reason)
	}
	return r, nil
}
