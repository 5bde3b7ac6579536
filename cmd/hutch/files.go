package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/internal/units"
	"github.com/hutchbox/hutch/runtime"
)

// The file commands give an agent that drives the CLI the library's file
// door: the same flags as run make the same Sandbox, whose ReadFile,
// WriteFile, ReadDir and Stat see what its commands would see; made by
// runtime.NewFiles, it starts no spawn server for commands it will not
// run, and its file server is the CLI's own child. Each prints
// one JSON object on stdout; a refusal is an error on stderr with exit
// status 1 (exitHutchFailed for hutch's own failures).

func fileCommands(code *int) []*cobra.Command {
	var (
		rf            = newRunFlags()
		offset, limit int64
		mode          string
		noFollow      bool
		appendTo      bool
		content, perm string
		fromStdin     bool
		wf, lf, sf    = newRunFlags(), newRunFlags(), newRunFlags()
		wNoFollow     bool
	)
	withSandbox := func(f runFlags, do func(*runtime.Sandbox) (any, error)) error {
		sb, err := filesSandboxFrom(f)
		if err != nil {
			return err
		}
		defer sb.Close()
		v, err := do(sb)
		// A value the caller gave that no file operation takes is a usage
		// error (exit 125), in the command line's words; a refusal of the
		// sandbox, or the file's own error, exits 1.
		if fe := (*runtime.FilePathError)(nil); errors.As(err, &fe) {
			flag, value := map[string]string{"ReadOptions.Mode": "--mode", "ReadOptions": "--offset/--limit", "WriteOptions.Perm": "--perm"}[fe.Field], fe.Path
			if flag == "" {
				flag = "PATH"
			}
			reason := strings.ReplaceAll(fe.Reason, "WriteFile takes absolute paths only", "hutch write takes an absolute PATH")
			switch flag {
			case "--mode":
				reason = `not "text" or "binary"`
			case "--offset/--limit":
				flag, value, reason = "--offset and --limit", fmt.Sprintf("%d %d", offset, limit), "negative"
			}
			return &flagErr{flag, value, reason}
		}
		if err != nil {
			*code = 1
			return f.flagError(err)
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	read := &cobra.Command{
		Use:   "read [flags] PATH",
		Short: "Read a file as a command in the sandbox would see it (JSON on stdout)",
		Long: `Read a file as a command in the sandbox would see it: the same flags as run
make the same policy. PATH is absolute or relative to the workspace. The file
is printed as JSON, as the local API's files/read answers: "content" for text
(whole UTF-8 characters), "content_base64" for binary content and images
(kind "image" with mime, width and height), and "length" in bytes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return withSandbox(rf, func(sb *runtime.Sandbox) (any, error) {
				c, err := sb.ReadFile(args[0], runtime.ReadOptions{Offset: offset, Limit: limit, Mode: runtime.ReadMode(mode), NoFollow: noFollow})
				if err != nil {
					return nil, err
				}
				return c, nil
			})
		},
	}
	addRunFlags(read.Flags(), &rf)
	read.Flags().Int64Var(&offset, "offset", 0, "first byte to read")
	read.Flags().Int64Var(&limit, "limit", 0, fmt.Sprintf("most bytes to read (default %d)", runtime.DefaultReadLimit))
	read.Flags().StringVar(&mode, "mode", "", `"text" or "binary" instead of detecting the content`)
	read.Flags().BoolVar(&noFollow, "no-follow", false, "refuse a PATH that is itself a symlink")

	write := &cobra.Command{
		Use:   "write [flags] PATH",
		Short: "Write a file as a command in the sandbox could (JSON on stdout)",
		Long: `Write a file as a command in the sandbox could: the same flags as run make
the same policy. PATH must be absolute; missing parent directories are
created. The content is --content, or stdin with --stdin; one of them is
required (--content '' writes an empty file).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var data []byte
			switch {
			case fromStdin && c.Flags().Changed("content"):
				return errors.New("write: --content and --stdin together")
			case !fromStdin && !c.Flags().Changed("content"):
				// Writing nothing would empty an existing file: an agent's
				// tool that forgot the flag loses the user's data.
				return errors.New("write: no content: give --content TEXT (--content '' for an empty file) or --stdin")
			case fromStdin:
				b, err := io.ReadAll(os.Stdin)
				if err != nil {
					return fmt.Errorf("write: read stdin: %w", err)
				}
				data = b
			default:
				data = []byte(content)
			}
			var mode os.FileMode
			if perm != "" {
				var err error
				if mode, err = units.ParsePerm(perm); err != nil {
					return &flagErr{"--perm", perm, "not an octal mode such as 644"}
				}
			}
			return withSandbox(wf, func(sb *runtime.Sandbox) (any, error) {
				return sb.WriteFile(args[0], data, runtime.WriteOptions{Append: appendTo, Perm: mode, NoFollow: wNoFollow})
			})
		},
	}
	addRunFlags(write.Flags(), &wf)
	write.Flags().StringVar(&content, "content", "", "what to write")
	write.Flags().BoolVar(&fromStdin, "stdin", false, "write what comes on stdin")
	write.Flags().BoolVar(&appendTo, "append", false, "add to the end of the file instead of replacing it")
	write.Flags().StringVar(&perm, "perm", "", "octal mode of a file the write creates (default 644)")
	write.Flags().BoolVar(&wNoFollow, "no-follow", false, "refuse a PATH that is itself a symlink")

	ls := &cobra.Command{
		Use:   "ls [flags] [DIR]",
		Short: "List a directory as a command in the sandbox would see it (JSON on stdout)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return withSandbox(lf, func(sb *runtime.Sandbox) (any, error) { return sb.ReadDir(dir) })
		},
	}
	addRunFlags(ls.Flags(), &lf)

	stat := &cobra.Command{
		Use:   "stat [flags] PATH",
		Short: "Describe a file as a command in the sandbox would see it (JSON on stdout)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return withSandbox(sf, func(sb *runtime.Sandbox) (any, error) { return sb.Stat(args[0]) })
		},
	}
	addRunFlags(stat.Flags(), &sf)
	return []*cobra.Command{read, write, ls, stat}
}
