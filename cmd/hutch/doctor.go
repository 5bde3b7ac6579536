//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/doctor"
	"github.com/hutchbox/hutch/oci"
	"github.com/hutchbox/hutch/runtime"
)

func doctorCommand() *cobra.Command {
	var asJSON, apparmor, ociRuntimes bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Say what this host gives a sandbox, what level hutch run gets here, and how to fix what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if apparmor {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				prof, err := doctor.AppArmorProfile(exe)
				if err != nil {
					return err
				}
				_, err = io.WriteString(cmd.OutOrStdout(), prof)
				return err
			}
			r, err := doctor.Probe(cmd.Context())
			if err != nil {
				return err
			}
			var runtimes []oci.RuntimeReport
			if ociRuntimes {
				for _, rt := range oci.Runtimes {
					runtimes = append(runtimes, oci.Probe(cmd.Context(), rt))
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				// hutch's version first, then the host's report.
				return enc.Encode(struct {
					Version string `json:"hutch_version"`
					*doctor.Report
					OCI []oci.RuntimeReport `json:"oci,omitempty"`
				}{version(), r, runtimes})
			}
			printDoctor(cmd.OutOrStdout(), r)
			if ociRuntimes {
				printRuntimes(cmd.OutOrStdout(), runtimes)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "the report as JSON")
	c.Flags().BoolVar(&ociRuntimes, "oci", false, "also run the default policy's OCI form under each installed OCI runtime ("+strings.Join(oci.Runtimes, ", ")+") and say what holds, judged on the host, and what each needs")
	c.Flags().BoolVar(&apparmor, "apparmor-profile", false, "print an AppArmor profile that lets this binary use user namespaces (for hosts that restrict them)")
	return c
}

func printDoctor(w io.Writer, r *doctor.Report) {
	mark := func(ok bool) string {
		if ok {
			return "ok     "
		}
		return "missing"
	}
	line := func(ok bool, what, detail string) {
		fmt.Fprintf(w, "  %s %-26s %s\n", mark(ok), what, detail)
	}
	fmt.Fprintf(w, "kernel %s (%s), uid %d\n", r.Kernel, r.Arch, r.UID)
	line(r.UserNS.Available, "user namespaces", r.UserNS.Reason)
	line(r.Proc.Available, "fresh /proc", r.Proc.Reason)
	ll := fmt.Sprintf("ABI %d", r.Landlock.ABI)
	if r.Landlock.Why != "" {
		ll += ": " + r.Landlock.Why
	}
	line(r.Landlock.ABI > 0, "Landlock", ll)
	line(r.Seccomp.Filter, "seccomp filters", fmt.Sprintf("user-notify %v, this process's mode %d", r.Seccomp.UserNotify, r.Seccomp.Mode))
	cg := "layout " + r.Cgroup.Layout
	if r.Cgroup.Reason != "" {
		cg += ": " + r.Cgroup.Reason
	}
	line(r.Cgroup.Writable, "cgroups for this user", cg)
	var names []string
	for n := range r.Syscalls {
		names = append(names, n)
	}
	sort.Strings(names)
	var missing []string
	for _, n := range names {
		if !r.Syscalls[n] {
			missing = append(missing, n)
		}
	}
	line(len(missing) == 0, "system calls", strings.Join(missing, " "))
	if r.Run != nil {
		detail := "layers: " + joinLayers(r.Run.Layers)
		if r.Run.UnixSocketWall != "" {
			detail += "; unix sockets by " + r.Run.UnixSocketWall
		}
		if r.Run.Error != "" {
			detail = r.Run.Error
		}
		line(r.Run.OK, "a sandboxed run", detail)
		for _, s := range r.Run.Skipped {
			fmt.Fprintf(w, "  %-7s %-26s %s\n", "", "", "skipped "+s)
		}
	}
	for _, m := range r.Remedies {
		fmt.Fprintf(w, "\n  %s\n    fix: %s\n", m.Problem, m.Fix)
	}
	level := string(r.Level)
	if level == "" {
		level = "none: hutch run refuses to start here"
	}
	fmt.Fprintf(w, "\nhutch run will use level: %s\n", level)
	for _, why := range r.LevelReasons {
		fmt.Fprintf(w, "  because %s\n", why)
	}
}

// printRuntimes says, for each OCI runtime, what of the default policy's
// OCI form held under it and what it needs.
func printRuntimes(w io.Writer, reports []oci.RuntimeReport) {
	fmt.Fprintf(w, "\nOCI runtimes (the default policy's OCI form, run as hutch run --backend oci runs it):\n")
	for _, r := range reports {
		head := r.Runtime
		if r.Version != "" {
			head += " (" + r.Version + ")"
		}
		if r.Rootless {
			head += ", rootless"
		}
		switch {
		case r.Unavailable != "":
			fmt.Fprintf(w, "  %s: cannot run here: %s\n", head, r.Unavailable)
			continue
		case r.Error != "":
			fmt.Fprintf(w, "  %s: the run failed: %s\n", head, r.Error)
		case r.Held():
			fmt.Fprintf(w, "  %s: every check held\n", head)
		default:
			fmt.Fprintf(w, "  %s: NOT every check held\n", head)
		}
		for _, c := range r.Checks {
			mark := "held   "
			if !c.Held {
				mark = "FAILED "
			}
			line := "    " + mark + c.Name
			if c.Detail != "" {
				line += ": " + c.Detail
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintf(w, "    needs: %s\n", strings.Join(r.Command, " "))
		for _, n := range r.Needs {
			fmt.Fprintf(w, "    needs: %s\n", n)
		}
	}
}

func joinLayers(ls []runtime.Layer) string {
	var s []string
	for _, l := range ls {
		s = append(s, string(l))
	}
	return strings.Join(s, " ")
}
