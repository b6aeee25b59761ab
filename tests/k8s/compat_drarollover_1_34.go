//go:build k8s_1_34

package k8stest

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager/cache"
)

// drainHealth reads a health stream to its end, as the kubelet's health
// cache would (the lists themselves are another test's concern).
type drainHealth struct{}

func (drainHealth) HandleWatchResourcesStream(ctx context.Context,
	stream drahealthv1alpha1.DRAResourceHealth_NodeWatchResourcesClient, _ string) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// startPluginWatcher runs the kubelet's plugin manager on dir with one
// handler until the test ends.
func startPluginWatcher(t *testing.T, _ context.Context, dir, kind string, h cache.PluginHandler) {
	m := pluginmanager.NewPluginManager(dir, &record.FakeRecorder{})
	m.AddHandler(kind, h)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return true })
	go m.Run(ready, stop)
}

// newDRAManager is the kubelet's DRA plugin manager for node "node-1"; it
// wipes a driver's slices an hour after its last instance went, which no
// test waits for.
func newDRAManager(ctx context.Context, client kubernetes.Interface) *plugin.DRAPluginManager {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-node-1"}}
	return plugin.NewDRAPluginManager(ctx, client, func() (*v1.Node, error) { return node, nil }, drainHealth{}, time.Hour)
}

// neverPrepared names a claim no instance prepared: its Unprepare needs no
// API server and succeeds on any live instance.
func neverPrepared() *drapbv1.Claim {
	return &drapbv1.Claim{Namespace: "ns", Name: "c", UID: "never-prepared"}
}

// draHealthGapChecked: the rollover test only logs the health gap on
// 1.34 (its health service is v1alpha1, and the gap was measured on 1.37).
const draHealthGapChecked = false
