package processes

import (
	"golang.org/x/sys/unix"

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
	s, id := storeWithRecord(t, root)
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

// TestStoreWritesOnAFullDisk: on a data directory with no room left, a
// record is still written, in the reserve's blocks (writeInReserve: never
// freed first, where another writer could take them); once there is room
// again the next write makes a new reserve. A small tmpfs stands for the
// disk (root only).
func TestStoreWritesOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	root := t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=512k"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	s, id := storeWithRecord(t, root)
	reserve := filepath.Join(s.dir(id), reserveFile)
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != reserveSize {
		t.Fatalf("no reserve after a write: %v", err)
	}
	filler, err := os.Create(filepath.Join(root, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := filler.Write(buf); err != nil {
			break
		}
	}
	filler.Close()
	if freeBytes(root) != 0 {
		t.Fatalf("%d bytes left after filling", freeBytes(root))
	}
	if _, err := s.update(id, func(p *Process) error { p.LogFull = true; return nil }); err != nil {
		t.Fatalf("an update on a full disk: %v", err)
	}
	if p, err := s.read(id); err != nil || !p.LogFull {
		t.Errorf("the record after it: %+v, %v", p, err)
	}
	if free := freeBytes(root); free >= reserveSize {
		t.Errorf("%d bytes free after the record was written on a full disk: more than its reserve held", free)
	}
	os.Remove(filepath.Join(root, "filler"))
	if _, err := s.update(id, func(p *Process) error { p.LogFull = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != reserveSize {
		t.Errorf("no new reserve once there is room: %v", err)
	}
}

// storeWithRecord is a store in root holding one record, and its id.
func storeWithRecord(t *testing.T, root string) (store, string) {
	t.Helper()
	s, id := store{root: root}, "0123456789ab"
	if err := os.Mkdir(s.dir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.write(id, Process{ID: id}); err != nil {
		t.Fatal(err)
	}
	return s, id
}
