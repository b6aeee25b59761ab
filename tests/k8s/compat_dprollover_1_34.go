//go:build k8s_1_34

package k8stest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
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
	m, err := devicemanager.NewManagerImpl(nil, topologymanager.NewFakeManager())
	if err != nil {
		t.Fatal(err)
	}
	ready := config.NewSourcesReady(func(sets.Set[string]) bool { return true })
	noPods := func() []*v1.Pod { return nil }
	if err := m.Start(noPods, ready, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	return func(res string) int64 {
		_, allocatable, _ := m.GetCapacity()
		q, ok := allocatable[v1.ResourceName(res)]
		if !ok {
			return 0
		}
		return q.Value()
	}
}
