package units_test

import (
	"math"
	"strings"
	"testing"

	"github.com/hutchbox/hutch/internal/units"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string // a part of the error, when one is wanted
	}{
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "1048576", want: 1 << 20},
		{in: "100B", want: 100},
		{in: "100b", want: 100},
		{in: "100 bytes", want: 100},
		{in: "1 byte", want: 1},
		{in: "1k", want: 1 << 10},
		{in: "512K", want: 512 << 10},
		{in: "512KB", want: 512 << 10},
		{in: "512KiB", want: 512 << 10},
		{in: "512M", want: 512 << 20},
		{in: "512mb", want: 512 << 20},
		{in: "512Mi", want: 512 << 20},
		{in: "10MiB", want: 10 << 20},
		{in: "10mib", want: 10 << 20},
		{in: "1Gi", want: 1 << 30},
		{in: "1G", want: 1 << 30},
		{in: "1.5GiB", want: 3 << 29},
		{in: "1.5g", want: 3 << 29},
		{in: ".5G", want: 1 << 29},
		{in: "1TiB", want: 1 << 40},
		{in: "2t", want: 2 << 40},
		{in: "1PiB", want: 1 << 50},
		{in: "0.1K", want: 102}, // a fraction of a byte is dropped
		{in: "0MiB", want: 0},
		{in: " 10MiB ", want: 10 << 20},
		{in: "10 MiB", want: 10 << 20},
		{in: "\t64k\n", want: 64 << 10},
		{in: "9223372036854775807", want: math.MaxInt64},
		{in: "8589934591G", want: 8589934591 << 30}, // the largest whole G that fits
		{in: "7.5P", want: 15 << 49},

		{in: "", err: "empty"},
		{in: "   ", err: "empty"},
		{in: "-1", err: "negative"},
		{in: "-1MiB", err: "negative"},
		{in: "-0", err: "negative"},
		{in: "+1", err: "sign"},
		{in: "NaN", err: "not a size"},
		{in: "Inf", err: "not a size"},
		{in: "MiB", err: "not a size"},
		{in: "k", err: "not a size"},
		{in: ".", err: "not a size"},
		{in: "1.2.3M", err: "not a size"},
		{in: "ten", err: "not a size"},
		{in: "10X", err: `unknown unit "X"`},
		{in: "10 M iB", err: "unknown unit"},
		{in: "10MiBMiB", err: "unknown unit"},
		{in: "10iB", err: "unknown unit"},
		{in: "10KK", err: "unknown unit"},
		{in: "0x10", err: "unknown unit"},
		{in: "1e6", err: "unknown unit"},
		{in: "1E", err: "unknown unit"}, // exbibytes would not fit an int64 limit anyway
		{in: "9223372036854775808", err: "too large"},
		{in: "8192P", err: "too large"},
		{in: "99999999999G", err: "too large"},
		{in: "1" + strings.Repeat("0", 400), err: "too large"},
	}
	for _, tt := range tests {
		got, err := units.ParseSize(tt.in)
		switch {
		case tt.err != "" && err == nil:
			t.Errorf("ParseSize(%q) = %d, want an error saying %q", tt.in, got, tt.err)
		case tt.err != "" && !strings.Contains(err.Error(), tt.err):
			t.Errorf("ParseSize(%q): %v, want it to say %q", tt.in, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("ParseSize(%q): %v, want %d", tt.in, err, tt.want)
		case tt.err == "" && got != tt.want:
			t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1023, "1023 bytes"},
		{4096, "4 KiB"},
		{4 << 20, "4 MiB"},
		{10 << 20, "10 MiB"},
		{3 << 29, "1.5 GiB"},
		{1 << 40, "1 TiB"},
		{1 << 50, "1 PiB"},
		{4123456789, "3.84 GiB"},
	}
	for _, tt := range tests {
		got := units.FormatSize(tt.n)
		if got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
		// What it prints reads back as the same size, to the precision shown.
		back, err := units.ParseSize(got)
		if err != nil || math.Abs(float64(back-tt.n)) > float64(tt.n)/200 {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", tt.n, got, back, err)
		}
	}
}
