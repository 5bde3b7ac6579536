package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/runtime"
)

// serveCommand is hutch serve: the local API (package localapi) over one
// Sandbox that run's flags describe, on a unix socket.
func serveCommand() *cobra.Command {
	f := newRunFlags()
	var (
		socket  string
		allow   []string
		prewarm int
	)
	c := &cobra.Command{
		Use:   "serve --socket PATH [run's flags] [--allow-uid N]...",
		Short: "Serve the local API (JSON over HTTP on a unix socket) for one sandbox policy",
		Long: `Serve the local API: plain JSON over HTTP/1.1 on a unix socket, for agents in
any language (see the README's "Local API"). The same flags as run make the
policy every request runs under. The socket is made mode 0600 in a directory
only its owner can enter (made 0700 when missing); a connection from another
uid than the server's, or one --allow-uid names, is closed unread.
SIGINT and SIGTERM stop the server: running commands are stopped (SIGTERM,
then SIGKILL after --kill-after), the socket removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return errors.New("serve: --socket PATH is required")
			}
			if f.resultJSON != "" {
				return &flagErr{"--result-json", f.resultJSON, "not for serve: each exec's result ends its response"}
			}
			if prewarm < 0 {
				return &flagErr{"--prewarm", strconv.Itoa(prewarm), "negative"}
			}
			uids, err := parseUIDs(allow)
			if err != nil {
				return err
			}
			killAfter, err := f.gracePeriod()
			if err != nil {
				return err
			}
			return serve(cmd.Context(), f, socket, uids, prewarm, killAfter)
		},
	}
	fl := c.Flags()
	addRunFlags(fl, &f)
	fl.StringVar(&socket, "socket", "", "the unix socket to serve on")
	fl.StringArrayVar(&allow, "allow-uid", nil, "a further uid whose connections are accepted (repeatable; the server's own always are)")
	fl.IntVar(&prewarm, "prewarm", 2, "sandbox inits kept built ahead of time, so that a command starts at once (0: none)")
	return c
}

// parseUIDs reads the --allow-uid values.
func parseUIDs(vs []string) ([]int, error) {
	var uids []int
	for _, v := range vs {
		// 4294967295 is (uid_t)-1, no uid at all.
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil || n == 1<<32-1 {
			return nil, &flagErr{"--allow-uid", v, "not a uid (a whole number from 0 to 4294967294)"}
		}
		uids = append(uids, int(n))
	}
	return uids, nil
}

func serve(ctx context.Context, f runFlags, socket string, uids []int, prewarm int, killAfter time.Duration) error {
	sb, err := sandboxFrom(f, func(p *runtime.Policy) { p.Prewarm = prewarm })
	if err != nil {
		return err
	}
	defer sb.Close()
	ln, err := localapi.Listen(socket, uids, slog.Default())
	if err != nil {
		return &flagErr{"--socket", socket, strings.TrimPrefix(err.Error(), "hutch: ")}
	}
	// Every request's context derives from base: a stop cancels the
	// commands still running, which then end as a timeout does.
	base, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	srv := &http.Server{
		Handler:           localapi.NewHandler(sb, localapi.Options{Version: version(), WaitDelay: killAfter}),
		BaseContext:       func(_ net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() {
		<-sigCtx.Done()
		stopAll()
		// The commands get their grace, and their responses the time to
		// carry the results; then whatever is left is cut.
		sctx, cancel := context.WithTimeout(context.Background(), killAfter+5*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if err != nil {
			srv.Close()
		}
		done <- err
	}()
	fmt.Fprintf(os.Stderr, "hutch: serving the local API (v%d) on %s\n", localapi.ProtocolVersion, socket)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}
