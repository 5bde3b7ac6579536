package localapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// encoding/json matches keys to fields without regard to case and lets
// the last of two equal keys win: {"argv": [...], "Argv": [...]} would run
// the second. The protocol is strict instead: strictKeys refuses, before
// the body is decoded, a key of the request object that is not one of its
// fields exactly as spelled, and a key given twice in any object of the
// body (env's included).

// strictKeys checks the JSON body b against v's type (a pointer to a
// request struct). A body that is not JSON is left to the decoder to
// describe.
func strictKeys(b []byte, v any) error {
	fields := jsonFields(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkKeys(dec, fields, ""); err != errNotJSON {
		return err
	}
	return nil // the decoder says what is wrong
}

// errNotJSON stops the walk at a body that is not JSON.
var errNotJSON = errors.New("not JSON")

// walkKeys reads one JSON value from dec; fields, when not nil, are the
// keys an object there may have. path names where it is, for errors.
func walkKeys(dec *json.Decoder, fields []string, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errNotJSON
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errNotJSON
			}
			key, _ := kt.(string)
			field := key
			if path != "" {
				field = path + "." + key
			}
			switch {
			case seen[key]:
				return badRequest(field, "given twice")
			case fields != nil && !slices.Contains(fields, key):
				if i := slices.IndexFunc(fields, func(f string) bool { return strings.EqualFold(f, key) }); i >= 0 {
					return badRequest(field, fmt.Sprintf("unknown field (keys are case-sensitive: %q)", fields[i]))
				}
				return badRequest(field, "unknown field")
			}
			seen[key] = true
			if err := walkKeys(dec, nil, field); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return errNotJSON
		}
	case json.Delim('['):
		for dec.More() {
			if err := walkKeys(dec, nil, path); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return errNotJSON
		}
	}
	return nil
}

// jsonFields are the JSON keys of struct type t, its embedded structs'
// included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// readAll reads body whole for decode, through its size limit.
func readAll(body io.Reader) ([]byte, error) { return io.ReadAll(body) }
