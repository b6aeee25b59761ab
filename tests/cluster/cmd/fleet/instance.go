package main

// One cdiplug DRA instance: its node's scratch tree (a host root with fake
// serial ports, a CDI dir, a kubelet root), its config, its process, and
// the kubelet's side of its registration, played here since no kubelet
// runs: the plugin watcher's GetInfo and NotifyRegistrationStatus on the
// socket it makes in <kubelet-root>/plugins_registry.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const driver = "cdiplug.example.com"

type instance struct {
	node    string
	dir     string // config.json, host/, cdi/, k/ (the kubelet root), log
	devices int    // the serial ports under host/dev
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	mu      sync.Mutex
	exitErr error
	regIno  uint64 // the registration socket last registered, by inode
}

// newInstance lays out DIR for node with n serial ports and writes its
// config and kubeconfig.
func newInstance(c *ca, dir, node, server string, n int) (*instance, error) {
	in := &instance{node: node, dir: dir, devices: n, exited: make(chan struct{})}
	for _, p := range []string{"host/dev", "cdi", "k/device-plugins"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			return nil, err
		}
	}
	// Character devices 60:N (major 60 is kept for local use): cdiplug
	// sees one device per node, as on a real host.
	for i := range n {
		p := filepath.Join(dir, "host/dev", fmt.Sprintf("ttyS%d", i))
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, (60<<8)|i); err != nil {
			return nil, fmt.Errorf("mknod %s: %w", p, err)
		}
	}
	conf := `{ "dra": { "driver": "` + driver + `" }, "resources": [
  { "name": "example.com/serial", "api": "dra", "match": [ { "path": "/dev/ttyS*" } ] } ] }`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if _, err := c.nodeKubeconfig(dir, node, server); err != nil {
		return nil, fmt.Errorf("%s: kubeconfig: %w", node, err)
	}
	return in, nil
}

// start runs cdiplug serve as shipped (sandboxed) for the instance's node.
func (in *instance) start(bin string) error {
	log, err := os.OpenFile(filepath.Join(in.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	in.cmd = exec.Command(bin, "serve", "--config", filepath.Join(in.dir, "config.json"),
		"--cdi-dir", filepath.Join(in.dir, "cdi"), "--host-root", filepath.Join(in.dir, "host"),
		"--kubelet-root", filepath.Join(in.dir, "k"), "--node-name", in.node,
		"--kubeconfig", filepath.Join(in.dir, "kubeconfig"))
	in.cmd.Stdout, in.cmd.Stderr = log, log
	// Should this program die, its instances die with it.
	in.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := in.cmd.Start(); err != nil {
		return fmt.Errorf("start %s for %s: %w", bin, in.node, err)
	}
	go func() {
		err := in.cmd.Wait()
		in.mu.Lock()
		in.exitErr = fmt.Errorf("cdiplug for %s exited: %v", in.node, err)
		in.mu.Unlock()
		close(in.exited)
	}()
	return nil
}

// exit is nil while the process runs, else how it ended.
func (in *instance) exit() error {
	select {
	case <-in.exited:
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.exitErr
	default:
		return nil
	}
}

// logTail is the last n lines of the instance's log.
func (in *instance) logTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(in.dir, "log"))
	lines := strings.SplitAfter(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-n-1):], "")
}

// stop sends SIGTERM and waits up to 10 s, then kills.
func (in *instance) stop() {
	if in.cmd == nil || in.cmd.Process == nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(10 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.exited
	}
}

// registrar plays the kubelet's plugin watcher for the instance until ctx
// ends: each new registration socket (a new inode) gets GetInfo, then
// NotifyRegistrationStatus(plugin_registered=true). It polls the directory
// every 50 ms: a hundred inotify watchers would do the same with more code.
func (in *instance) registrar(ctx context.Context, errs chan<- error) {
	reg := filepath.Join(in.dir, "k", "plugins_registry")
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		socks, _ := filepath.Glob(filepath.Join(reg, "*.sock"))
		for _, s := range socks {
			var st syscall.Stat_t
			// The kubelet's plugin watcher skips hidden names too.
			if strings.HasPrefix(filepath.Base(s), ".") || syscall.Stat(s, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || st.Ino == in.regIno {
				continue
			}
			if err := register(ctx, s); err != nil {
				// Retried on the next tick, as the kubelet retries.
				select {
				case errs <- fmt.Errorf("%s: register %s: %w", in.node, s, err):
				default:
				}
				continue
			}
			in.regIno = st.Ino
		}
	}
}

func register(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := registerapi.NewRegistrationClient(conn)
	info, err := c.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo: %w", err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != driver {
		_, _ = c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{
			Error: fmt.Sprintf("expected a %s plugin named %s", registerapi.DRAPlugin, driver)})
		return fmt.Errorf("GetInfo: type %q name %q", info.Type, info.Name)
	}
	if _, err := c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		return fmt.Errorf("NotifyRegistrationStatus: %w", err)
	}
	return nil
}

// startAll starts the instances spread evenly over spread, each with its
// registrar, and returns the start time of the first.
func startAll(ctx context.Context, bin string, ins []*instance, spread time.Duration, errs chan<- error) (time.Time, error) {
	t0 := time.Now()
	for i, in := range ins {
		if d := time.Until(t0.Add(spread * time.Duration(i) / time.Duration(len(ins)))); d > 0 {
			time.Sleep(d)
		}
		if err := in.start(bin); err != nil {
			return t0, err
		}
		go in.registrar(ctx, errs)
	}
	return t0, nil
}

// exited lists how each instance that is no longer running ended.
func exited(ins []*instance) error {
	var all []error
	for _, in := range ins {
		all = append(all, in.exit())
	}
	return errors.Join(all...)
}
