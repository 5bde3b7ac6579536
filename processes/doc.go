// Package processes owns durable processes: sandboxed services (a dev
// server, a watcher, a bot) that outlive the host program that started
// them, are adopted by the next one, and are restarted with backoff.
//
//	m, err := processes.Open(dataDir)
//	m.Supervisor = "/usr/local/bin/hutch" // empty: the hutch on $PATH
//	p, err := m.Start(ctx, processes.Spec{Policy: runtime.DefaultPolicy(ws), Args: []string{"npm", "run", "dev"}})
//	// ... the host may exit or die; later, in any host program:
//	m, err = processes.Open(dataDir)
//	list, err := m.List()
//	err = m.Stop(ctx, p.ID)
//
// # Who supervises
//
// Each durable process has a supervisor of its own: a hutch binary
// (Manager.Supervisor) started with a role marker that its main hands to
// SupervisorMain, detached in a session of its own, as conmon or
// containerd's shim keep a container. It is a program of its own, never
// the host program started again: none of the host's code (the init
// function of each package it links) runs in a process that outlives it
// and holds its sandbox. It holds the process's
// runtime.Sandbox for the process's whole life, so every run, restarts
// included, gets that one resolved policy, cgroup limits and egress proxy;
// it runs the command, copies its output into the log, restarts it with
// backoff, and stops it when told. Why not the others:
//   - the host program: it is the thing that may die, and restarts must
//     go on while no host runs;
//   - the host program's binary started again (as this package once did):
//     every package init the agent links would run in it again, with
//     its side effects, for as long as the process lives;
//   - the sandbox's own init (pid 1 of its namespace): it runs inside the
//     boundary, it would write the log from there, and the egress proxy
//     of an allow-list policy lives on the host side anyway;
//   - systemd: not on every host, not reachable for an unprivileged user
//     everywhere, and not in containers; its restart logic is the model
//     for the backoff (Restart=, a delay doubling to a cap).
//
// When the supervisor ends, the sandbox ends with it: its spawn server
// and every sandbox init die with their parent (PR_SET_PDEATHSIG), so a
// record whose supervisor is gone has nothing left running. A supervisor
// that ends on its own (a stop, a command done) does not leave that to
// the kernel's timing: it kills and reaps everything below it (as a
// child subreaper) before it ends, so that when Stop returns nothing of
// the process runs.
//
// # Identity
//
// A process is known by its Identity, never by its pid alone: a pid is
// reused once its process is reaped, and a record may outlive a reboot, so
// every check and every signal goes through the pid together with the
// process's start time and the boot id, and through a pidfd opened before
// the last check. Open adopts the live supervisors that way (a pidfd held
// until Close), marks the records whose supervisor is gone stale, clears
// their pids, and never signals them.
//
// # Storage
//
// <data dir>/processes/<id>/ holds record.json (the Process: desired
// state, status, pids, restart policy, backoff state, the last runs),
// sandbox.json (the Spec, and the manager's decision on its Policy: a
// versioned runtime.Resolved, which the supervisor runs whole through
// runtime.NewResolved instead of deciding again), process.log and
// process.log.1 (the command's stdout and stderr, rotated at
// Spec.LogMaxBytes), and supervisor.log (the supervisor's own messages). The command never holds the log: its output reaches the
// supervisor through pipes, and the data directory is masked in every
// durable sandbox and refused inside its writable trees. record.json
// changes only under a flock of the directory's lock file and is replaced
// by a rename, so two managers and the supervisor never lose each other's
// changes and no reader sees half a file; the supervisor holds
// supervisor.lock for its life, so a process never has two.
package processes
