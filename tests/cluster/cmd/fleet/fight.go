package main

// Two cdiplug instances on one node that disagree (two serial ports, three
// serial ports; the same driver and node, each with its own kubelet root,
// as a rollover's old and new pods would have with different configs):
// each wants the node's pool to hold its devices. They must not fight over
// the slices at the API server's pace: at most fightMax writes (ADDED,
// MODIFIED or DELETED events of the node's slices) in fightWindow from the
// first.

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

const (
	fightNode   = "fight-node"
	fightWindow = 10 * time.Second
	fightMax    = 30
)

// fight runs the two instances and returns the writes counted in the
// window.
func fight(ctx context.Context, cs kubernetes.Interface, c *ca, bin, dir, server string) (int, error) {
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fightNode}},
		metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create Node %s: %w", fightNode, err)
	}
	var ins []*instance
	for _, n := range []int{2, 3} {
		in, err := newInstance(c, filepath.Join(dir, fmt.Sprintf("fight-%d", n)), fightNode, server, n)
		if err != nil {
			return 0, err
		}
		ins = append(ins, in)
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + fightNode}
	w, err := cs.ResourceV1().ResourceSlices().Watch(ctx, sel)
	if err != nil {
		return 0, fmt.Errorf("watch the slices of %s: %w", fightNode, err)
	}
	defer w.Stop()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 8)
	if _, err := startAll(rctx, bin, ins, 0, errs); err != nil {
		return 0, err
	}
	defer func() {
		for _, in := range ins {
			in.stop()
		}
		_ = cs.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	}()
	writes, first := 0, time.After(60*time.Second)
	var window <-chan time.Time
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return writes, fmt.Errorf("the watch of %s's slices ended", fightNode)
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
				continue
			}
			writes++
			if window == nil {
				window, first = time.After(fightWindow), nil
			}
		case <-first:
			return 0, fmt.Errorf("no slice of %s within 60 s (%v)", fightNode, exited(ins))
		case <-window:
			return writes, exited(ins)
		}
	}
}
