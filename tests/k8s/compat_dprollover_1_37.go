//go:build k8s_1_37

package k8stest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/config"
)

// startDeviceManager runs the kubelet's device manager (its registration
// socket in dpRollDir) until the test ends, and returns how many devices
// of a resource it counts allocatable.
func startDeviceManager(t *testing.T) func(res string) int64 {
	t.Helper()
	logger := klog.Background()
	m, err := devicemanager.NewManagerImpl(logger, nil, topologymanager.NewFakeManager(logger))
	if err != nil {
		t.Fatal(err)
	}
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return true })
	noPods := func() []*v1.Pod { return nil }
	if err := m.Start(logger, noPods, ready, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop(logger) })
	return func(res string) int64 {
		_, allocatable, _ := m.GetCapacity(logger)
		q, ok := allocatable[v1.ResourceName(res)]
		if !ok {
			return 0
		}
		return q.Value()
	}
}
