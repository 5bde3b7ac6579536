//go:build linux

package oci

import (
	"errors"

	"github.com/hutchbox/hutch/internal/ociview"
	"github.com/hutchbox/hutch/runtime"
)

// view is a Resolved compiled for an OCI runtime, with its policy.
type view struct {
	ociview.View
	Policy runtime.Policy
}

// compile compiles r for an OCI runtime.
func compile(r *runtime.Resolved) (view, error) {
	if r == nil {
		return view{}, errors.New("oci: no policy given (a *runtime.Resolved from runtime.Check)")
	}
	v, err := ociview.Compile(r)
	if err != nil {
		return view{}, err
	}
	return view{View: v, Policy: r.Policy()}, nil
}
