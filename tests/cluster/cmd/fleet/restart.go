package main

// The API server's restarts and the wipe, and the small statistics the
// figures print.

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// restartAPI stops the API server, keeps it down for the outage, starts
// it, and as soon as /readyz is ok deletes every ResourceSlice (as each
// kubelet does when it starts); then waits for every node's slices and
// for every node's watches to stream again.
func (f *fleet) restartAPI(ctx context.Context, i int, kinds map[string]map[string]bool) {
	name := fmt.Sprintf("restart %d: all %d nodes' slices back", i, len(f.ins))
	f.tr.begin()
	stop := time.Now()
	if err := f.hookRun("stop"); err != nil {
		f.check(name, err)
		return
	}
	figure("restart %d: kube-apiserver gone %s after SIGTERM (SIGKILL after 10 s)", i, fmtDur(time.Since(stop)))
	time.Sleep(f.outage)
	start := time.Now()
	if err := f.hookRun("start"); err != nil {
		f.check(name, err)
		return
	}
	ready, err := f.waitReady(ctx, 90*time.Second)
	if err != nil {
		f.check(name, err)
		return
	}
	if err := f.deleteSlices(ctx); err != nil {
		f.check(name, err)
		return
	}
	wiped := time.Now()
	done := f.tr.wait(120 * time.Second)
	figure("restart %d: %s down, ready %s after its start, slices wiped at ready+%s; slices back (from ready): %s",
		i, fmtDur(f.outage), fmtDur(ready.Sub(start)), fmtDur(wiped.Sub(ready)), spread(sinceAll(done, ready)))
	f.check(name, f.missing(done, nil))
	f.reconnectFigures(i, start, ready, kinds)
}

// reconnectFigures waits (up to 60 s) until the audit log shows every
// node's watches streaming again, and prints the reconnects' spread.
func (f *fleet) reconnectFigures(i int, start, ready time.Time, kinds map[string]map[string]bool) {
	var first, back map[string]time.Time
	var reqs []request
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for {
		if reqs, err = readAudit(f.audit); err != nil {
			fmt.Printf("fleet: restart %d: audit log: %v\n", i, err)
			return
		}
		first, back = reconnects(reqs, start, kinds)
		if len(back) == len(kinds) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	end := start
	if len(back) < len(kinds) {
		end = time.Now()
	}
	for _, t := range back {
		if t.After(end) {
			end = t
		}
	}
	f.load(reqs, fmt.Sprintf("restart %d, from the start to 1 s after the last watch is back", i),
		start, end.Add(time.Second))
	figure("restart %d: first request per node (from ready): %s", i, spread(sinceAll(first, ready)))
	figure("restart %d: all watches back (from ready) for %d of %d nodes: %s", i, len(back), len(kinds),
		spread(sinceAll(back, ready)))
}

// wipe deletes every slice with the API server up and waits for them.
func (f *fleet) wipe(ctx context.Context) {
	name := fmt.Sprintf("wipe: all %d nodes' slices back", len(f.ins))
	f.tr.begin()
	t := time.Now()
	if err := f.deleteSlices(ctx); err != nil {
		f.check(name, err)
		return
	}
	done := f.tr.wait(60 * time.Second)
	figure("wipe of every slice: republished (from the delete): %s", spread(sinceAll(done, t)))
	end := t
	for _, d := range done {
		if d.After(end) {
			end = d
		}
	}
	if reqs, err := readAudit(f.audit); err == nil {
		f.load(reqs, "wipe, from the delete to 1 s after the last node is back", t, end.Add(time.Second))
	}
	f.check(name, f.missing(done, nil))
}

func (f *fleet) deleteSlices(ctx context.Context) error {
	if err := f.cs.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete every ResourceSlice: %w", err)
	}
	return nil
}

// waitReady polls /readyz every 50 ms.
func (f *fleet) waitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, time.Second)
		body, err := f.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(c)
		cancel()
		if err == nil && string(body) == "ok" {
			return time.Now(), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("kube-apiserver not ready within %v of its start", timeout)
}

// load prints the nodes' requests within [from, to).
func (f *fleet) load(reqs []request, what string, from, to time.Time) {
	in := inWindow(reqs, f.want, from, to)
	figure("%s (%s): %d requests, %.1f per node, busiest second %d; by kind: %v", what, fmtDur(to.Sub(from)),
		len(in), float64(len(in))/float64(len(f.want)), busiest(in), byKind(in))
}

// busiest is the most requests that came in within one second (buckets
// aligned to the first request).
func busiest(reqs []request) int {
	if len(reqs) == 0 {
		return 0
	}
	t0 := reqs[0].received
	for _, r := range reqs {
		if r.received.Before(t0) {
			t0 = r.received
		}
	}
	n := map[int64]int{}
	best := 0
	for _, r := range reqs {
		b := int64(r.received.Sub(t0) / time.Second)
		n[b]++
		best = max(best, n[b])
	}
	return best
}

func sinceAll(m map[string]time.Time, t0 time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range m {
		out = append(out, t.Sub(t0))
	}
	return out
}

// spread is "n N, min, p50, p90, max" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(p int) time.Duration { return s[(len(s)-1)*p/100] }
	return fmt.Sprintf("n %d, min %s, p50 %s, p90 %s, max %s", len(s), fmtDur(s[0]), fmtDur(pct(50)),
		fmtDur(pct(90)), fmtDur(s[len(s)-1]))
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func maxDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func minF(v []float64) float64 { return slices.Min(v) }
func maxF(v []float64) float64 { return slices.Max(v) }

func meanF(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
