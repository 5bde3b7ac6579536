// Package processes owns durable processes: sandboxed services that
// outlive the host agent that started them and are adopted by the next
// one (issue 17).
//
// A durable process is known by its Identity, never by its pid alone: a
// pid is reused once its process is reaped, and a record may outlive a
// reboot, so every check and every signal goes through the pid together
// with the process's start time and the boot id, and through a pidfd
// opened before the last check. What the manager keeps of each process,
// and who supervises it while no host runs, build on this.
package processes
