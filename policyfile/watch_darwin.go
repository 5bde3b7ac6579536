package policyfile

import (
	"github.com/fsnotify/fsnotify"
)

// dirEvents are the names in a directory that changed (a write, a
// rename, a creation); loadWhole's second reading keeps a file being
// written from being loaded half-done.
type dirEvents struct {
	fsw   *fsnotify.Watcher
	names chan string
	errs  chan error
}

func watchDir(dir string) (*dirEvents, error) {
	fsw, err := fsnotify.NewWatcher()
	if err == nil {
		err = fsw.Add(dir)
	}
	if err != nil {
		if fsw != nil {
			fsw.Close()
		}
		return nil, err
	}
	e := &dirEvents{fsw: fsw, names: make(chan string, 16), errs: make(chan error, 1)}
	go func() {
		defer close(e.names)
		for {
			select {
			case ev, ok := <-fsw.Events:
				if !ok {
					return
				}
				if !ev.Has(fsnotify.Chmod) {
					e.names <- ev.Name
				}
			case err, ok := <-fsw.Errors:
				if !ok {
					return
				}
				e.errs <- err
			}
		}
	}()
	return e, nil
}

func (e *dirEvents) close() { e.fsw.Close() }
