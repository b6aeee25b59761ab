// Command fleet runs many cdiplug DRA instances, one per Node object,
// against a real kube-apiserver (fleet.sh starts it, with etcd and an
// audit log) and measures what a fleet costs the API server and how it
// comes back: the time until every node's slices are complete, the idle
// request rate per node, the reconnects and the slices' return after API
// server restarts (fleet.sh's hook stops and starts it), the republish
// after a wipe of every slice. It checks what must hold (every node's
// slices come back, no instance exits) and, first, that two instances
// that disagree on one node do not fight over its slices. Timings are
// printed, never asserted.
//
//	fleet -cdiplug BIN -pki DIR -dir DIR -audit FILE [-nodes N] -- HOOK...
//
// HOOK stop / HOOK start stop and start the API server. Ends with
// "fleet: N passed, F failed, S skipped"; exits 1 when a check failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type fleet struct {
	cs      kubernetes.Interface
	ca      *ca
	bin     string
	dir     string
	audit   string
	hook    []string
	server  string
	ins     []*instance
	want    map[string]int // devices by node
	tr      *tracker
	passed  int
	failed  int
	outage  time.Duration
	settle  time.Duration
	idle    time.Duration
	restart int
}

func main() {
	f := &fleet{}
	var pki string
	nodes := flag.Int("nodes", 100, "cdiplug instances, one per Node object")
	flag.StringVar(&f.bin, "cdiplug", "", "the cdiplug binary")
	flag.StringVar(&pki, "pki", "", "pki.sh's directory (ca.crt, ca.key, admin.kubeconfig)")
	flag.StringVar(&f.dir, "dir", "", "scratch directory for the instances")
	flag.StringVar(&f.audit, "audit", "", "the API server's audit log")
	flag.DurationVar(&f.outage, "outage", 10*time.Second, "how long the API server stays down")
	flag.DurationVar(&f.settle, "settle", 5*time.Second, "wait after the publish before the idle window")
	flag.DurationVar(&f.idle, "idle", 60*time.Second, "the idle window")
	flag.IntVar(&f.restart, "restarts", 2, "API server restarts")
	flag.Parse()
	f.hook = flag.Args()
	if f.bin == "" || pki == "" || f.dir == "" || f.audit == "" || len(f.hook) == 0 {
		fmt.Fprintln(os.Stderr, "usage: fleet -cdiplug BIN -pki DIR -dir DIR -audit FILE [-nodes N] -- HOOK...")
		os.Exit(2)
	}
	if err := f.setup(pki, *nodes); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		fmt.Println("fleet: 0 passed, 1 failed, 0 skipped")
		os.Exit(1)
	}
	f.run()
	fmt.Printf("fleet: %d passed, %d failed, 0 skipped\n", f.passed, f.failed)
	if f.failed > 0 {
		os.Exit(1)
	}
}

func (f *fleet) setup(pki string, n int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(pki, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	// The test's own requests must not wait for client-go's rate limiter.
	cfg.QPS, cfg.Burst = 1000, 1000
	f.server = cfg.Host
	if f.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	// fleet.sh has just started the API server.
	if _, err := f.waitReady(context.Background(), 90*time.Second); err != nil {
		return err
	}
	if f.ca, err = loadCA(pki); err != nil {
		return err
	}
	f.want = map[string]int{}
	for i := range n {
		node := fmt.Sprintf("node-%d", i)
		f.want[node] = 2
		in, err := newInstance(f.ca, filepath.Join(f.dir, "n", node), node, f.server, 2)
		if err != nil {
			return err
		}
		f.ins = append(f.ins, in)
	}
	return nil
}

func (f *fleet) check(name string, err error) {
	if err != nil {
		f.failed++
		fmt.Printf("fleet: FAIL %s: %v\n", name, err)
		return
	}
	f.passed++
	fmt.Printf("fleet: PASS %s\n", name)
}

func figure(format string, a ...any) {
	fmt.Printf("fleet: figure: "+format+"\n", a...)
}

func (f *fleet) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writes, err := fight(ctx, f.cs, f.ca, f.bin, f.dir, f.server)
	figure("two disagreeing instances on one node: %d slice writes in %v (at most %d allowed)",
		writes, fightWindow, fightMax)
	if err == nil && writes > fightMax {
		err = fmt.Errorf("%d slice writes in %v, more than %d", writes, fightWindow, fightMax)
	}
	f.check("two disagreeing instances on one node do not fight", err)

	f.tr = newTracker(f.want)
	go f.tr.follow(ctx, f.cs)
	defer f.stopAll()
	if !f.publish(ctx) {
		return
	}
	kinds := f.idleRate()
	for i := 1; i <= f.restart; i++ {
		f.restartAPI(ctx, i, kinds)
	}
	f.wipe(ctx)
	f.check("no instance exits", exited(f.ins))
}

// publish makes the Node objects, starts the instances and waits for
// every node's slices.
func (f *fleet) publish(ctx context.Context) bool {
	for _, in := range f.ins {
		if _, err := f.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.node}},
			metav1.CreateOptions{}); err != nil {
			f.check("publish", fmt.Errorf("create Node %s: %w", in.node, err))
			return false
		}
	}
	errs := make(chan error, 16)
	// Over two seconds, as a DaemonSet's pods start over a while.
	t0, err := startAll(ctx, f.bin, f.ins, 2*time.Second, errs)
	if err != nil {
		f.check("publish", err)
		return false
	}
	done := f.tr.wait(90 * time.Second)
	var since []time.Duration
	for _, t := range done {
		since = append(since, t.Sub(t0))
	}
	figure("%d instances started over 2 s: all slices complete %s after the first start (per node: %s)",
		len(f.ins), fmtDur(maxDur(since)), spread(since))
	f.check(fmt.Sprintf("all %d nodes' slices published", len(f.ins)), f.missing(done, errs))
	return len(done) == len(f.ins)
}

// missing says which nodes are not complete, with what the instances and
// the registrar reported.
func (f *fleet) missing(done map[string]time.Time, errs chan error) error {
	var miss []string
	var tail string
	for _, in := range f.ins {
		if _, ok := done[in.node]; !ok {
			if len(miss) == 0 {
				tail = in.logTail(8)
			}
			miss = append(miss, in.node)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	fmt.Printf("fleet: the log of %s ends:\n%s", miss[0], tail)
	select {
	case err := <-errs:
		return fmt.Errorf("%d nodes without complete slices (%v); last registrar error: %v; %v",
			len(miss), head(miss), err, exited(f.ins))
	default:
		return fmt.Errorf("%d nodes without complete slices (%v); %v", len(miss), head(miss), exited(f.ins))
	}
}

func head(s []string) []string {
	if len(s) > 5 {
		return append(s[:5:5], "...")
	}
	return s
}

func (f *fleet) stopAll() {
	for _, in := range f.ins {
		if in.cmd != nil && in.cmd.Process != nil {
			_ = in.cmd.Process.Signal(os.Interrupt)
		}
	}
	for _, in := range f.ins {
		in.stop()
	}
}

// idleRate measures the instances' requests over the idle window and
// returns what each node watches.
func (f *fleet) idleRate() map[string]map[string]bool {
	time.Sleep(f.settle)
	from := time.Now()
	time.Sleep(f.idle)
	to := time.Now()
	reqs, err := readAudit(f.audit)
	if err != nil {
		f.check("idle request rate", err)
		return nil
	}
	in := inWindow(reqs, f.want, from, to)
	perNodeMin := float64(len(in)) / float64(len(f.want)) / to.Sub(from).Minutes()
	figure("idle: %d requests from %d nodes in %s: %.3f requests per node per minute; by kind: %v",
		len(in), len(f.want), fmtDur(to.Sub(from)), perNodeMin, byKind(in))
	if ts := watchTimeouts(inWindow(reqs, f.want, time.Time{}, to)); len(ts) > 0 {
		figure("watch timeoutSeconds asked so far: %d watches, min %.0f, mean %.0f, max %.0f",
			len(ts), minF(ts), meanF(ts), maxF(ts))
	}
	return watched(inWindow(reqs, f.want, time.Time{}, to), to)
}

func (f *fleet) hookRun(action string) error {
	cmd := exec.Command(f.hook[0], append(f.hook[1:], action)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v %s: %w", f.hook, action, err)
	}
	return nil
}
