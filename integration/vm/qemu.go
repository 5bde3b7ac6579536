package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// accel picks KVM only where it really works: the CPU shows vmx or svm
// and the KVM module is not the software nested one (kvm_pvm), under
// which stock Debian kernels hang. Everywhere else: TCG.
func accel() (machine, cpu, why string) {
	tcg := func(why string) (string, string, string) { return "q35,accel=tcg", "max", why }
	if os.Getenv("HUTCH_VM_ACCEL") == "tcg" {
		return tcg("HUTCH_VM_ACCEL=tcg")
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return tcg("no /dev/kvm")
	}
	if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil {
		return tcg("/dev/kvm is the software nested module kvm_pvm")
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	hw := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "flags") {
			for _, f := range strings.Fields(l) {
				if f == "vmx" || f == "svm" {
					hw = true
				}
			}
			break
		}
	}
	if !hw {
		return tcg("the CPU has no vmx/svm flag")
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return tcg("/dev/kvm: " + err.Error())
	}
	f.Close()
	return "q35,accel=kvm", "host", "vmx/svm and /dev/kvm"
}

type bootConfig struct {
	machine, cpu string
	smp          int
	memMB        int
	timeout      time.Duration
}

// boot runs one guest to poweroff (or until the wall-clock timeout),
// writing its console to logPath, and returns the console text. progress
// gets each console line as it arrives.
func boot(ctx context.Context, bc bootConfig, vmlinuz, initrd, logPath string, progress func(string)) (string, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, bc.timeout)
	defer cancel()
	args := []string{
		"-machine", bc.machine, "-cpu", bc.cpu, "-smp", strconv.Itoa(bc.smp), "-m", strconv.Itoa(bc.memMB),
		"-nodefaults", "-no-user-config", "-nographic", "-serial", "stdio", "-monitor", "none",
		"-nic", "none", "-no-reboot",
		"-kernel", vmlinuz, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet",
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdin = nil
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = cmd.Stdout
	logf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# qemu-system-x86_64 %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	var all strings.Builder
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			all.WriteString(line)
			logf.WriteString(line)
			if progress != nil {
				progress(strings.TrimRight(line, "\r\n"))
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				fmt.Fprintf(logf, "\n# console read: %v\n", err)
			}
			break
		}
	}
	werr := cmd.Wait()
	var problems []string
	if ctx.Err() == context.DeadlineExceeded {
		problems = append(problems, fmt.Sprintf("wall-clock timeout: the guest ran past %v and was killed", bc.timeout))
	} else if werr != nil {
		problems = append(problems, "qemu: "+werr.Error())
	}
	for _, p := range problems {
		fmt.Fprintf(logf, "\n# %s\n", p)
	}
	return all.String(), problems, nil
}
