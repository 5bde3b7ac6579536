// Package units reads and writes the quantities of hutch's text forms
// (the CLI's flags, policy files, the local API's fields): byte sizes
// and file permission modes, each with the reason a value is refused.
package units

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// sizeUnits are the multiples ParseSize knows, in order: K is 1024, M is
// 1024 K, and so on.
const sizeUnits = "KMGTP"

// ParseSize reads a byte count as people type one: a plain number of
// bytes (1048576), or a number, possibly with a fraction, and a unit K, M,
// G, T or P, optionally followed by i and B, in any case and with or
// without a space: 100 bytes, 512M, 512mb, 1Gi, 1.5GiB, 1TiB, 10 MiB. Every unit is a
// power of 1024, as memory limits are counted by the kernel, docker and
// the ps and free tools alike: 1MB, 1M and 1MiB are all 1048576 bytes. A
// fraction of a byte is dropped (0.1K is 102 bytes). Negative numbers,
// NaN, infinities, exponents, hexadecimal and values past the int64 range
// are refused, saying why.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty; give a size such as 512MiB, 1.5G or 1048576")
	}
	// The number is digits with at most one decimal point; whatever
	// follows is the unit.
	end := 0
	for end < len(t) && (t[end] >= '0' && t[end] <= '9' || t[end] == '.') {
		end++
	}
	num, unit := t[:end], strings.TrimSpace(t[end:])
	switch {
	case strings.HasPrefix(t, "-"):
		return 0, errors.New("negative; a size counts bytes")
	case strings.HasPrefix(t, "+"):
		return 0, errors.New("not a size: a sign is not part of one (512MiB, 1.5G, 1048576)")
	case strings.Count(num, ".") > 1 || strings.Trim(num, ".") == "":
		return 0, errors.New("not a size: it should start with a number (512MiB, 1.5G, 1048576)")
	}
	mult, err := sizeMultiple(unit)
	if err != nil {
		return 0, err
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, errors.New("not a size: it should start with a number (512MiB, 1.5G, 1048576)")
	}
	v.Mul(v, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(v.Num(), v.Denom()) // whole bytes, rounded down
	if !n.IsInt64() {
		return 0, fmt.Errorf("too large: more than %s", FormatSize(math.MaxInt64))
	}
	return n.Int64(), nil
}

// sizeMultiple is the number of bytes a unit of ParseSize stands for.
func sizeMultiple(unit string) (int64, error) {
	u := strings.ToUpper(unit)
	if u == "" || u == "B" || u == "BYTE" || u == "BYTES" {
		return 1, nil
	}
	u = strings.TrimSuffix(u, "B")
	u = strings.TrimSuffix(u, "I")
	if i := strings.Index(sizeUnits, u); len(u) == 1 && i >= 0 {
		return 1 << (10 * (i + 1)), nil
	}
	return 0, fmt.Errorf("unknown unit %q: use K, M, G, T or P, optionally with i and B (512M, 1.5GiB)", unit)
}

// FormatSize renders a byte count in the largest unit it fills, to two
// decimals at most: 10 MiB, 1.5 GiB, 3.84 GiB, 512 bytes. ParseSize reads
// it back, exactly when it has no more than two decimals to show.
func FormatSize(n int64) string {
	for i := len(sizeUnits); i > 0; i-- {
		if u := int64(1) << (10 * i); n >= u {
			v := strconv.FormatFloat(float64(n)/float64(u), 'f', 2, 64)
			v = strings.TrimSuffix(strings.TrimRight(v, "0"), ".")
			return v + " " + sizeUnits[i-1:i] + "iB"
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// ParsePerm reads a file mode as the file doors take it in text
// (WriteOptions.Perm from hutch write --perm and the local API): octal
// digits alone, at most 0777.
func ParsePerm(s string) (fs.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("%q: not an octal mode such as 644", s)
	}
	return fs.FileMode(m), nil
}
