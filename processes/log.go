package processes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// The files of a process's directory.
const (
	recordFile     = "record.json"
	sandboxFile    = "sandbox.json"
	logFile        = "process.log"
	oldLogFile     = "process.log.1"
	lockFile       = "lock"            // held while record.json is rewritten
	supervisorLock = "supervisor.lock" // held by its supervisor for its life
	supervisorLog  = "supervisor.log"  // the supervisor's own diagnostics
)

// rotatingLog is process.log as the supervisor writes it: the command's
// stdout and stderr come through pipes, so the command never holds the
// file and cannot rewrite or truncate it. A write that would take it past
// max moves it to process.log.1 first.
//
// A full data directory never kills the command: what cannot be written
// is dropped and counted (dropped), and once a write goes through again a
// line says how much was lost. full is called when the log starts or
// stops dropping, for the record.
type rotatingLog struct {
	mu      sync.Mutex
	dir     string
	max     int64
	f       *os.File
	size    int64
	dropped int64 // bytes dropped since the log was last written
	lost    int64 // bytes dropped in all
	full    func(full bool, lost int64)
	// room, when set, says whether the data directory has room enough
	// for the log to go on once it has dropped: more than the records'
	// reserve, whose space a record freed on a full disk is the record's,
	// not the command's output's (which would take it at once, and leave
	// the record unable to say the log is full).
	room func() bool
}

func openLog(dir string, max int64) (*rotatingLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, logFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &rotatingLog{dir: dir, max: max, f: f, size: fi.Size()}, nil
}

func (l *rotatingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 && l.room != nil && !l.room() {
		return l.drop(len(p), syscall.ENOSPC)
	}
	if l.dropped > 0 {
		// Room again? Say first what was lost.
		note := fmt.Sprintf("\n[hutch: %d bytes of output were dropped: the data directory was full]\n", l.dropped)
		if err := l.write([]byte(note)); err != nil {
			return l.drop(len(p), err)
		}
		l.dropped = 0
		if l.full != nil {
			l.full(false, l.lost)
		}
	}
	if err := l.write(p); err != nil {
		return l.drop(len(p), err)
	}
	return len(p), nil
}

// drop counts n bytes as dropped when err is a full disk, and is the
// Write's answer.
func (l *rotatingLog) drop(n int, err error) (int, error) {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return 0, err
	}
	if l.dropped == 0 && l.full != nil {
		l.full(true, l.lost+int64(n))
	}
	l.dropped += int64(n)
	l.lost += int64(n)
	return n, nil
}

// write writes p whole, rotating on the way.
func (l *rotatingLog) write(p []byte) error {
	for len(p) > 0 {
		if l.size >= l.max {
			if err := l.rotate(); err != nil {
				return err
			}
		}
		chunk := p[:min(int64(len(p)), l.max-l.size)]
		n, err := l.f.Write(chunk)
		l.size += int64(n)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// rotate moves the log to process.log.1 and starts an empty one.
func (l *rotatingLog) rotate() error {
	// Gone already: a rotation before this one renamed it and could not
	// make the new file (a full disk); it is made now.
	if err := os.Rename(filepath.Join(l.dir, logFile), filepath.Join(l.dir, oldLogFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, logFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	l.f.Close()
	l.f, l.size = f, 0
	return nil
}

func (l *rotatingLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
