package k8stest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemon is one cdiplug serve process with its own host root, CDI dir and
// log, stopped with SIGTERM when the test ends.
type daemon struct {
	t      *testing.T
	Dir    string // scratch: config.json, the host root, cdi/
	Host   string // --host-root
	CDIDir string // --cdi-dir
	Config string // --config
	cmd    *exec.Cmd
	mu     sync.Mutex
	log    bytes.Buffer
}

// newDaemon lays out the scratch dirs and writes the config; start runs it.
func newDaemon(t *testing.T, config string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, Dir: dir, Host: filepath.Join(dir, "host"),
		CDIDir: filepath.Join(dir, "cdi"), Config: filepath.Join(dir, "config.json")}
	for _, p := range []string{d.Host, filepath.Join(d.Host, "dev"), d.CDIDir} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d.WriteConfig(config)
	return d
}

// WriteConfig replaces the config atomically, as a ConfigMap update does.
func (d *daemon) WriteConfig(config string) {
	d.t.Helper()
	tmp := d.Config + ".tmp"
	if err := os.WriteFile(tmp, []byte(config), 0o644); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, d.Config); err != nil {
		d.t.Fatal(err)
	}
}

// Mknod makes a character device node under the host root with device
// numbers of its own (char major 60, kept for local use), so that cdiplug
// sees one device per node. It needs root, as mknod does.
func (d *daemon) Mknod(rel string, minor uint32) {
	d.t.Helper()
	p := filepath.Join(d.Host, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		d.t.Fatal(err)
	}
	dev := int((60 << 8) | (minor & 0xff) | ((minor &^ 0xff) << 12))
	if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, dev); err != nil {
		d.t.Skipf("mknod %s: %v (fake device nodes need root)", p, err)
	}
}

// Start runs cdiplug serve with the scratch dirs and the given options.
func (d *daemon) Start(args ...string) {
	d.t.Helper()
	argv := append([]string{"serve", "--config", d.Config, "--cdi-dir", d.CDIDir,
		"--host-root", d.Host, "--verbose"}, args...)
	if os.Geteuid() != 0 {
		argv = append(argv, "--no-sandbox")
	}
	d.cmd = exec.Command(cdiplugBin, argv...)
	d.cmd.Stdout = &lockedWriter{d}
	d.cmd.Stderr = &lockedWriter{d}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("start %s: %v", cdiplugBin, err)
	}
	d.t.Cleanup(func() {
		d.Stop()
		if d.t.Failed() {
			d.t.Logf("cdiplug log:\n%s", d.Log())
		}
	})
}

// Stop sends SIGTERM and waits for the daemon (SIGKILL after 10 s).
func (d *daemon) Stop() {
	if d.cmd == nil || d.cmd.Process == nil || d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
		d.t.Errorf("cdiplug did not stop within 10 s of SIGTERM")
	}
}

// Signal sends sig to the daemon (SIGHUP reloads its config).
func (d *daemon) Signal(sig syscall.Signal) {
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
}

// Log is what the daemon printed so far.
func (d *daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// WaitLog waits until the log holds substr.
func (d *daemon) WaitLog(substr string, timeout time.Duration) {
	d.t.Helper()
	eventually(d.t, timeout, "cdiplug to log "+substr, func() bool {
		return strings.Contains(d.Log(), substr)
	})
}

type lockedWriter struct{ d *daemon }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.log.Write(p)
}

// eventually polls cond every 20 ms until it holds or timeout passes: the
// kubelet's managers report through caches and goroutines that offer no
// event to wait on.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
