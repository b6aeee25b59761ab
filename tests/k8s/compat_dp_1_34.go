//go:build k8s_1_34

package k8stest

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/config"
)

// Up to 1.34 the device manager logs through klog's global logger, and
// its topology comes from cadvisor's info/v1.

func dpNewManager(store topologymanager.Store) (*devicemanager.ManagerImpl, error) {
	return devicemanager.NewManagerImpl(nil, store)
}

func dpTopologyStore(hint *topologymanager.TopologyHint) topologymanager.Store {
	if hint == nil {
		return topologymanager.NewFakeManager()
	}
	return topologymanager.NewFakeManagerWithHint(hint)
}

func dpStart(m *devicemanager.ManagerImpl, pods devicemanager.ActivePodsFunc, ready config.SourcesReady,
	containers containermap.ContainerMap, running sets.Set[string]) error {
	return m.Start(pods, ready, containers, running)
}

func dpStop(m *devicemanager.ManagerImpl) error { return m.Stop() }

func dpAllocate(m *devicemanager.ManagerImpl, pod *v1.Pod, c *v1.Container) error {
	return m.Allocate(pod, c)
}

func dpCapacity(m *devicemanager.ManagerImpl) (v1.ResourceList, v1.ResourceList, []string) {
	return m.GetCapacity()
}

func dpRunOptions(m *devicemanager.ManagerImpl, pod *v1.Pod, c *v1.Container) (*devicemanager.DeviceRunContainerOptions, error) {
	return m.GetDeviceRunContainerOptions(pod, c)
}

func dpAllocatableDevices(m *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return m.GetAllocatableDevices()
}

func dpUpdateAllocated(m *devicemanager.ManagerImpl) { m.UpdateAllocatedDevices() }
