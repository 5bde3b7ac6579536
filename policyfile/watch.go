//go:build linux || darwin

package policyfile

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/hutchbox/hutch/runtime"
)

// Watcher keeps a Sandbox on a policy file: every change of the file is
// read and put in effect with Sandbox.Reload, or refused (the old policy
// stays) when it does not validate.
type Watcher struct {
	sb       *runtime.Sandbox
	fsw      *fsnotify.Watcher
	done     chan struct{}
	onReload func(error)
}

// Watch makes the Sandbox of the policy file at path (on the default,
// with profile, for workspace) and reloads it whenever the file changes:
// written in place, or replaced by a rename as editors and atomic
// writers do. onReload (may be nil) hears of each reload: nil once the
// new policy is in effect, or the error (file, line and key) that kept
// the old one.
func Watch(path, workspace, profile string, onReload func(error)) (*Watcher, error) {
	path = filepath.Clean(path)
	load := func() (runtime.Policy, *File, error) {
		f, err := ReadFile(path)
		if err != nil {
			return runtime.Policy{}, nil, err
		}
		p, err := Policy(workspace, profile, f)
		return p, f, err
	}
	p, f, err := load()
	if err != nil {
		return nil, err
	}
	sb, err := runtime.New(p)
	if err != nil {
		return nil, f.Explain(err, profile)
	}
	fsw, err := fsnotify.NewWatcher()
	if err == nil {
		// The directory, not the file: a rename over the file replaces
		// the inode a watch on the file would follow.
		err = fsw.Add(filepath.Dir(path))
	}
	if err != nil {
		if fsw != nil {
			fsw.Close()
		}
		sb.Close()
		return nil, fmt.Errorf("policyfile: watch %s: %w", path, err)
	}
	w := &Watcher{sb: sb, fsw: fsw, done: make(chan struct{}), onReload: onReload}
	go w.watch(path, func() error {
		p, f, err := load()
		if err != nil {
			return err
		}
		return f.Explain(sb.Reload(p), profile)
	})
	return w, nil
}

// Sandbox is the Sandbox that follows the file.
func (w *Watcher) Sandbox() *runtime.Sandbox { return w.sb }

// Close stops watching and closes the Sandbox.
func (w *Watcher) Close() error {
	w.fsw.Close()
	<-w.done
	return w.sb.Close()
}

// watch reloads on every change of path, once a burst of events (an
// editor's write, rename and chmod) has settled.
func (w *Watcher) watch(path string, reload func() error) {
	defer close(w.done)
	const settle = 20 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) == path && !ev.Has(fsnotify.Chmod) {
				timer.Reset(settle)
			}
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.report(fmt.Errorf("policyfile: watching %s: %w", path, err))
		case <-timer.C:
			w.report(reload())
		}
	}
}

func (w *Watcher) report(err error) {
	if w.onReload != nil {
		w.onReload(err)
	}
}
