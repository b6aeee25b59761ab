package main

// The test's own view of every ResourceSlice: a list, then a watch from
// its resourceVersion, listed again at once whenever the watch ends or the
// API server is away (every 100 ms, no back-off: the test wants to see a
// slice come back the moment it does, not after a client's back-off).
// Each node's slices are "complete" when every pool of the driver has all
// the slices its resourceSliceCount says, at one generation, with the
// node's devices in them.

import (
	"context"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

type tracker struct {
	mu      sync.Mutex
	slices  map[string]*resourcev1.ResourceSlice // by name
	want    map[string]int                       // devices by node
	old     map[types.UID]bool                   // slices that do not count: from before the epoch
	done    map[string]time.Time                 // when each node became complete in this epoch
	changed chan struct{}                        // closed and replaced on every change
}

func newTracker(want map[string]int) *tracker {
	return &tracker{slices: map[string]*resourcev1.ResourceSlice{}, want: want,
		old: map[types.UID]bool{}, done: map[string]time.Time{}, changed: make(chan struct{})}
}

// complete tells whether node's slices are complete, counting only slices
// made in this epoch. Called with mu held.
func (t *tracker) complete(node string) bool {
	type pool struct {
		gen           int64
		count, seen   int64
		devices, want int
	}
	pools := map[string]*pool{}
	for _, s := range t.slices {
		if s.Spec.NodeName == nil || *s.Spec.NodeName != node || s.Spec.Driver != driver || t.old[s.UID] {
			continue
		}
		p := pools[s.Spec.Pool.Name]
		if p == nil || s.Spec.Pool.Generation > p.gen {
			p = &pool{gen: s.Spec.Pool.Generation, count: s.Spec.Pool.ResourceSliceCount}
			pools[s.Spec.Pool.Name] = p
		}
		if s.Spec.Pool.Generation == p.gen {
			p.seen++
			p.devices += len(s.Spec.Devices)
		}
	}
	devices := 0
	for _, p := range pools {
		if p.seen != p.count {
			return false
		}
		devices += p.devices
	}
	return len(pools) > 0 && devices == t.want[node]
}

// update re-evaluates the nodes and wakes the waiters. Called with mu held.
func (t *tracker) update(now time.Time) {
	for node := range t.want {
		if _, ok := t.done[node]; !ok && t.complete(node) {
			t.done[node] = now
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// begin starts an epoch: the slices there are now no longer count, and no
// node is complete until new ones are.
func (t *tracker) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.old = map[types.UID]bool{}
	for _, s := range t.slices {
		t.old[s.UID] = true
	}
	t.done = map[string]time.Time{}
}

// wait waits until every node is complete in this epoch or timeout passes,
// and returns when each node became complete.
func (t *tracker) wait(timeout time.Duration) map[string]time.Time {
	deadline := time.After(timeout)
	for {
		t.mu.Lock()
		ch := t.changed
		if len(t.done) == len(t.want) {
			done := copyTimes(t.done)
			t.mu.Unlock()
			return done
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.mu.Lock()
			defer t.mu.Unlock()
			return copyTimes(t.done)
		}
	}
}

func copyTimes(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// follow keeps the tracker's slices in step with the API server until ctx
// ends.
func (t *tracker) follow(ctx context.Context, cs kubernetes.Interface) {
	api := cs.ResourceV1().ResourceSlices()
	for ctx.Err() == nil {
		list, err := api.List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		t.slices = map[string]*resourcev1.ResourceSlice{}
		for i := range list.Items {
			t.slices[list.Items[i].Name] = &list.Items[i]
		}
		t.update(time.Now())
		t.mu.Unlock()
		w, err := api.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*resourcev1.ResourceSlice)
			if !ok {
				break // an error event: list again
			}
			t.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(t.slices, s.Name)
			} else {
				t.slices[s.Name] = s
			}
			t.update(time.Now())
			t.mu.Unlock()
		}
		w.Stop()
	}
}
