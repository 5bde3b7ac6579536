package processes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// store is the directory of process directories, <data dir>/processes.
// Each record.json is only ever replaced whole (a rename), so a reader
// needs no lock; a writer reads, changes and replaces it under the
// directory's lock file, so two writers (two managers, a manager and the
// supervisor) never lose each other's change.
type store struct{ root string }

func (s store) dir(id string) string { return filepath.Join(s.root, id) }

func (s store) read(id string) (Process, error) {
	var p Process
	b, err := os.ReadFile(filepath.Join(s.dir(id), recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return p, fmt.Errorf("processes: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return p, &recordError{path: filepath.Join(s.dir(id), recordFile), err: err}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, &recordError{path: filepath.Join(s.dir(id), recordFile), err: err}
	}
	if p.ID != id {
		return p, &recordError{path: filepath.Join(s.dir(id), recordFile), err: fmt.Errorf("names process %q", p.ID)}
	}
	return p, nil
}

// recordError is a record that exists but cannot be read: truncated, not
// JSON, a directory in its place, another process's.
type recordError struct {
	path string
	err  error
}

func (e *recordError) Error() string {
	return "processes: " + e.path + ": unreadable: " + e.err.Error()
}
func (e *recordError) Unwrap() error { return e.err }

// lock takes id's record lock (flock, released if the holder dies).
func (s store) lock(id string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir(id), lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("processes: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("processes: lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// write replaces id's record with p; the caller holds the lock. The new
// file is synced before the rename: after a crash the record is the old
// one or the new one, never a torn one.
func (s store) write(id string, p Process) error {
	err := s.writeOnce(id, p)
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		// A full data directory: the record is written into the
		// reserve's blocks, allocated already, and the reserve becomes
		// the record (a record that cannot say the process runs, or why
		// it ended, is worse than a full disk). Freeing the reserve
		// first would let any writer on the disk take its room before
		// the record does.
		err = s.writeInReserve(id, p)
	}
	if err == nil {
		s.reserve(id)
	}
	return err
}

// writeInReserve writes p into id's reserve file, which needs no new
// block, and renames it over the record.
func (s store) writeInReserve(id string, p Process) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	path := filepath.Join(s.dir(id), reserveFile)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if len(b) > reserveSize {
		err = fmt.Errorf("processes: a record of %d bytes does not fit the reserve", len(b))
	}
	if err == nil {
		_, err = f.WriteAt(b, 0)
	}
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path, filepath.Join(s.dir(id), recordFile))
	}
	return err
}

// logResumeRoom is the free space a log that dropped output waits for
// before it writes again: twice a reserve, so that a reserve given up for
// a record on a full disk stays the record's.
const logResumeRoom = 2 * reserveSize

// freeBytes is the space left to an unprivileged writer in dir's
// filesystem; 0 when it cannot be told.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}

// reserveFile holds space a record can always be written in.
const reserveFile = "reserve"

// reserveSize is what it holds: a few records' worth.
const reserveSize = 64 << 10

// reserve makes id's reserve file if it is missing and there is room.
func (s store) reserve(id string) {
	path := filepath.Join(s.dir(id), reserveFile)
	if _, err := os.Lstat(path); err == nil {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, reserveSize)
	if errors.Is(err, unix.EOPNOTSUPP) {
		_, err = f.Write(make([]byte, reserveSize))
		if err == nil {
			err = f.Sync()
		}
	}
	f.Close()
	if err != nil {
		os.Remove(path) // no room: made again at a later write
	}
}

func (s store) writeOnce(id string, p Process) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	final := filepath.Join(s.dir(id), recordFile)
	tmp, err := os.CreateTemp(s.dir(id), recordFile+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), final)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// update changes id's record with f under its lock and returns what it
// wrote. f may return errUnchanged to write nothing.
func (s store) update(id string, f func(*Process) error) (Process, error) {
	unlock, err := s.lock(id)
	if err != nil {
		return Process{}, err
	}
	defer unlock()
	p, err := s.read(id)
	if err != nil {
		return p, err
	}
	switch err := f(&p); {
	case errors.Is(err, errUnchanged):
		return p, nil
	case err != nil:
		return p, err
	}
	return p, s.write(id, p)
}

// errUnchanged is update's signal from f that the record stays as it is.
var errUnchanged = errors.New("unchanged")
