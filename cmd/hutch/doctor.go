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
	"github.com/hutchbox/hutch/runtime"
)

func doctorCommand() *cobra.Command {
	var asJSON, apparmor bool
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
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				// hutch's version first, then the host's report.
				return enc.Encode(struct {
					Version string `json:"hutch_version"`
					*doctor.Report
				}{version(), r})
			}
			printDoctor(cmd.OutOrStdout(), r)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "the report as JSON")
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

func joinLayers(ls []runtime.Layer) string {
	var s []string
	for _, l := range ls {
		s = append(s, string(l))
	}
	return strings.Join(s, " ")
}
