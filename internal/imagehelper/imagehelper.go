// Package imagehelper is how the hutch CLI unpacks an image without
// linking the unpacker: it runs the hutch-image helper (cmd/hutch-image),
// which unpacks with package images/unpack and answers with one JSON
// Reply on its standard output.
//
// The helper runs as the CLI's user, with the CLI's environment, as the
// unpacking did when it was part of the CLI: it writes only in the cache
// it is given, and what it unpacks is read by sandboxes, never run on the
// host.
package imagehelper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/hutchbox/hutch/images"
	"github.com/hutchbox/hutch/internal/helpers"
)

// Name is the helper's file name, looked for beside the running program
// and then on $PATH.
const Name = "hutch-image"

// Reply is the helper's answer: the image unpacked, or why not.
type Reply struct {
	Image *images.Image `json:"image,omitempty"`
	Error *Failure      `json:"error,omitempty"`
}

// Failure is an *images.Error on the wire.
type Failure struct {
	Reason string `json:"reason"`
	Err    string `json:"err,omitempty"`
}

// Write writes the reply for what unpacking returned.
func Write(w io.Writer, im *images.Image, err error) error {
	var r Reply
	switch {
	case err == nil:
		r.Image = im
	default:
		r.Error = &Failure{Reason: err.Error()}
		var ie *images.Error
		if errors.As(err, &ie) {
			r.Error.Reason = ie.Reason
			if ie.Err != nil {
				r.Error.Err = ie.Err.Error()
			}
		}
	}
	return json.NewEncoder(w).Encode(r)
}

// Find returns the helper's path: the file beside the running program
// (a build or a package installs the two together), else the one $PATH
// names.
func Find() (string, error) { return helpers.Find(Name, "the image helper") }

// Unpack runs the helper at path on layout and tag, unpacking into cache.
// Its errors are *images.Error: the helper's own, or what went wrong
// running it.
func Unpack(ctx context.Context, path, layout, tag, cache string) (*images.Image, error) {
	fail := func(reason string, err error) error {
		return &images.Error{Layout: layout, Tag: tag, Reason: reason, Err: err}
	}
	ref := layout
	if tag != "" {
		ref += ":" + tag
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--cache", cache, "--", ref)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var r Reply
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || (r.Image == nil) == (r.Error == nil) {
		if runErr == nil {
			runErr = errors.New("no reply")
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			runErr = fmt.Errorf("%w: %s", runErr, msg)
		}
		return nil, fail("run "+path, runErr)
	}
	if r.Error != nil {
		var err error
		if r.Error.Err != "" {
			err = errors.New(r.Error.Err)
		}
		return nil, fail(r.Error.Reason, err)
	}
	return r.Image, nil
}
