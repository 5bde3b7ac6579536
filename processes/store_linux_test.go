package processes

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

const storeHelperEnv = "HUTCH_PROCESSES_STORE_HELPER"

// TestMain lets the test binary act as a second process updating a
// record, and as the supervisor of the processes its tests start
// (testSupervisor).
func TestMain(m *testing.M) {
	SupervisorMain()
	if v := os.Getenv(storeHelperEnv); v != "" {
		os.Exit(storeHelper(v))
	}
	os.Exit(m.Run())
}

// testSupervisor is the supervisor program of the tests' managers: this
// test binary, whose TestMain calls SupervisorMain.
var testSupervisor, _ = os.Executable()

// storeHelper adds 1 to the record's Restarts n times: "root id n".
func storeHelper(v string) int {
	var root, id string
	var n int
	if _, err := fmt.Sscan(v, &root, &id, &n); err != nil {
		return 2
	}
	s := store{root: root}
	for range n {
		if _, err := s.update(id, func(p *Process) error { p.Restarts++; return nil }); err != nil {
			return 1
		}
	}
	return 0
}

// TestStoreUpdatesAreNotLost: two processes and several goroutines
// updating one record at once lose no update, and no reader ever sees a
// torn file.
func TestStoreUpdatesAreNotLost(t *testing.T) {
	root := t.TempDir()
	s := store{root: root}
	id := "0123456789ab"
	if err := os.Mkdir(s.dir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.write(id, Process{ID: id}); err != nil {
		t.Fatal(err)
	}
	const perWorker = 200
	self, _ := os.Executable()
	helper := exec.Command(self, "-test.run", "^$")
	helper.Env = append(os.Environ(), storeHelperEnv+"="+root+" "+id+" "+strconv.Itoa(perWorker))
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// The reader is joined before the test ends: one still reading when
	// t.TempDir's cleanup removes the directory would see it gone.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.read(id); err != nil {
				t.Errorf("a reader saw: %v", err)
				return
			}
		}
	}()
	stopReader := sync.OnceFunc(func() { close(stop); <-readerDone })
	defer stopReader()
	for range 3 {
		wg.Go(func() {
			for range perWorker {
				if _, err := s.update(id, func(p *Process) error { p.Restarts++; return nil }); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := helper.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}
	stopReader()
	p, err := s.read(id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Restarts != 4*perWorker {
		t.Errorf("%d updates counted, want %d", p.Restarts, 4*perWorker)
	}
	if left, _ := filepath.Glob(filepath.Join(s.dir(id), recordFile+".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// FuzzRecord holds the records loader to any bytes in a record.json: it
// reads a record or says it is unreadable (a *recordError), never panics,
// and List lists it either way beside a good one.
func FuzzRecord(f *testing.F) {
	good, _ := json.Marshal(Process{ID: "0123456789ab", Status: StatusStopped, Desired: DesiredStopped})
	for _, s := range [][]byte{good, good[:len(good)/2], nil, []byte("{}"), []byte(`{"id":"x"}`), []byte("\x00"), []byte(`{"id":"0123456789ab","status":7}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		root := t.TempDir()
		m, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for id, body := range map[string][]byte{"0123456789ab": b, "ba9876543210": []byte(`{"id":"ba9876543210","status":"stopped","desired":"stopped"}`)} {
			dir := m.store.dir(id)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, recordFile), body, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.store.read("0123456789ab"); err != nil && !unreadable(err) {
			t.Fatalf("read: %v, want a record or an unreadable one", err)
		}
		list, err := m.List()
		if err != nil || len(list) != 2 {
			t.Fatalf("List = %+v, %v: want both records", list, err)
		}
	})
}
