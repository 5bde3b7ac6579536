package localapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchbox/hutch/localapi"
	"github.com/hutchbox/hutch/runtime"
)

// The local API serves one Sandbox on a unix socket (what hutch serve
// does): any language's HTTP client runs commands and uses the file door
// through it. POST /v1/exec answers with one JSON event per line.
func ExampleNewHandler() {
	ws, err := os.MkdirTemp("", "hutch-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)
	sockDir, err := os.MkdirTemp("", "hutch-example-sock-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(sockDir)

	sb, err := runtime.New(runtime.DefaultPolicy(ws))
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	sock := filepath.Join(sockDir, "hutch.sock")
	ln, err := localapi.Listen(sock, nil, nil) // this uid only
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: localapi.NewHandler(sb, localapi.Options{Version: "example"})}
	go srv.Serve(ln)
	defer srv.Close()

	// The client: any HTTP client that dials the socket.
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := client.Post("http://hutch/v1/exec", "application/json",
		strings.NewReader(`{"command": "echo hi > note.txt; cat note.txt"}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	for events.Scan() {
		var ev localapi.Event
		if err := json.Unmarshal(events.Bytes(), &ev); err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case "stdout":
			fmt.Printf("stdout: %q\n", ev.Data)
		case "result":
			fmt.Println("exit status:", *ev.ExitStatus)
		default:
			fmt.Println(ev.Type)
		}
	}
	b, _ := os.ReadFile(filepath.Join(ws, "note.txt"))
	fmt.Printf("on the host: %q\n", b)

	// A refusal is a JSON error naming the field.
	resp, err = client.Post("http://hutch/v1/exec", "application/json", strings.NewReader(`{"argv": ["true"], "cwd": "/etc"}`))
	if err != nil {
		log.Fatal(err)
	}
	var refusal localapi.ErrorResponse
	json.NewDecoder(resp.Body).Decode(&refusal)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, refusal.Error.Code, refusal.Error.Field)
	// Output:
	// started
	// stdout: "hi\n"
	// exit status: 0
	// on the host: "hi\n"
	// 400 bad_request cwd
}
