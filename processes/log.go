package processes

import (
	"os"
	"path/filepath"
	"sync"
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
type rotatingLog struct {
	mu   sync.Mutex
	dir  string
	max  int64
	f    *os.File
	size int64
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
	written := 0
	for len(p) > 0 {
		if l.size >= l.max {
			if err := l.rotate(); err != nil {
				return written, err
			}
		}
		chunk := p[:min(int64(len(p)), l.max-l.size)]
		n, err := l.f.Write(chunk)
		written += n
		l.size += int64(n)
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// rotate moves the log to process.log.1 and starts an empty one.
func (l *rotatingLog) rotate() error {
	if err := os.Rename(filepath.Join(l.dir, logFile), filepath.Join(l.dir, oldLogFile)); err != nil {
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
