//go:build k8s_1_37

package k8stest

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// Unlike 1.34, the 1.37 device manager takes a logger (or a context carrying
// one) on every call.

func dpNewManager(store topologymanager.Store) (*devicemanager.ManagerImpl, error) {
	return devicemanager.NewManagerImpl(klog.Background(), nil, store)
}

func dpTopologyStore(hint *topologymanager.TopologyHint) topologymanager.Store {
	if hint == nil {
		return topologymanager.NewFakeManager(klog.Background())
	}
	return topologymanager.NewFakeManagerWithHint(klog.Background(), hint)
}

func dpStart(m *devicemanager.ManagerImpl, pods devicemanager.ActivePodsFunc, ready config.SourcesReady,
	containers containermap.ContainerMap, running sets.Set[string]) error {
	return m.Start(klog.Background(), pods, ready, containers, running)
}

func dpStop(m *devicemanager.ManagerImpl) error { return m.Stop(klog.Background()) }

func dpAllocate(m *devicemanager.ManagerImpl, pod *v1.Pod, c *v1.Container) error {
	return m.Allocate(context.Background(), pod, c, lifecycle.AddOperation)
}

func dpCapacity(m *devicemanager.ManagerImpl) (v1.ResourceList, v1.ResourceList, []string) {
	return m.GetCapacity(klog.Background())
}

func dpRunOptions(m *devicemanager.ManagerImpl, pod *v1.Pod, c *v1.Container) (*devicemanager.DeviceRunContainerOptions, error) {
	return m.GetDeviceRunContainerOptions(context.Background(), pod, c)
}

func dpAllocatableDevices(m *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return m.GetAllocatableDevices(klog.Background())
}

func dpUpdateAllocated(m *devicemanager.ManagerImpl) { m.UpdateAllocatedDevices(klog.Background()) }
