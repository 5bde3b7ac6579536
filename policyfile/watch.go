//go:build linux || darwin

package policyfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hutchbox/hutch/runtime"
)

// Watcher keeps a Sandbox on a policy file: every change of the file is
// read and put in effect with Sandbox.Reload, or refused (the old policy
// stays) when it does not validate.
type Watcher struct {
	sb       *runtime.Sandbox
	ev       *dirEvents
	done     chan struct{}
	onReload func(error)
}

// Watch makes the Sandbox of the policy file at path (on the default,
// with profile, for workspace) and reloads it whenever the file changes:
// written in place, or replaced by a rename as editors and atomic
// writers do. A policy is loaded whole or not at all: on Linux a file
// written in place is read once its writer has closed it (a writer that
// pauses midway is never read half-written), and everywhere the file
// must read the same twice, a moment apart, to be loaded; a rename into
// place is the way to change it at once. onReload (may be nil) hears of each reload: nil once the
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
	// The directory, not the file: a rename over the file replaces the
	// inode a watch on the file would follow.
	ev, err := watchDir(filepath.Dir(path))
	if err != nil {
		sb.Close()
		return nil, fmt.Errorf("policyfile: watch %s: %w", path, err)
	}
	w := &Watcher{sb: sb, ev: ev, done: make(chan struct{}), onReload: onReload}
	go w.watch(path, func() error {
		p, f, err := loadWhole(path, load)
		if err != nil {
			return err
		}
		return f.Explain(sb.Reload(p), profile)
	})
	return w, nil
}

// loadWhole loads the file twice, a moment apart, and puts nothing in
// effect unless both readings are the same bytes: a file read while a
// writer was still at it (whose events come later) is never loaded.
func loadWhole(path string, load func() (runtime.Policy, *File, error)) (runtime.Policy, *File, error) {
	first, err := os.ReadFile(path)
	if err != nil {
		return runtime.Policy{}, nil, err
	}
	time.Sleep(stable)
	p, f, err := load()
	if err != nil {
		return p, f, err
	}
	second, err := os.ReadFile(path)
	if err == nil && !bytes.Equal(first, second) {
		err = fmt.Errorf("policyfile: %s changed while it was read; the policy in effect stays", path)
	}
	return p, f, err
}

// stable is how long a file must stay the same to be loaded.
const stable = 50 * time.Millisecond

// Sandbox is the Sandbox that follows the file.
func (w *Watcher) Sandbox() *runtime.Sandbox { return w.sb }

// Close stops watching and closes the Sandbox.
func (w *Watcher) Close() error {
	w.ev.close()
	<-w.done
	return w.sb.Close()
}

// watch reloads on every complete change of path (watchDir says which
// events are), once a burst of them has settled.
func (w *Watcher) watch(path string, reload func() error) {
	defer close(w.done)
	const settle = 20 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case name, ok := <-w.ev.names:
			if !ok {
				return
			}
			if filepath.Clean(name) == path {
				timer.Reset(settle)
			}
		case err, ok := <-w.ev.errs:
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
