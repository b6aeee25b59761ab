package k8stest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The fake host under --host-root: device nodes and the sysfs that
// cdiplug reads their NUMA node from, laid out as the kernel does.

// MknodNum makes a character device node under the host root with the
// given numbers (root only, as mknod is).
func (d *daemon) MknodNum(rel string, major, minor uint32) {
	d.t.Helper()
	p := filepath.Join(d.Host, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		d.t.Fatal(err)
	}
	dev := int((major&0xfff)<<8 | (minor & 0xff) | (minor&^0xff)<<12)
	if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, dev); err != nil {
		d.t.Skipf("mknod %s: %v (fake device nodes need root)", p, err)
	}
}

// HostFile writes a file under the host root, making its parents.
func (d *daemon) HostFile(rel, content string) {
	d.t.Helper()
	p := filepath.Join(d.Host, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

// Unlink removes a node under the host root, as udev does on unplug.
func (d *daemon) Unlink(rel string) {
	d.t.Helper()
	if err := os.Remove(filepath.Join(d.Host, rel)); err != nil {
		d.t.Fatal(err)
	}
}

// NumaNode makes /dev/<rel> (char 60:minor, as Mknod numbers it) a device
// of a PCI function on NUMA node numa: the function's directory carries
// numa_node, the device's own directory sits below it, and
// /sys/dev/char/60:<minor> leads there, which is how cdiplug (like udev)
// finds a node's sysfs device.
func (d *daemon) NumaNode(rel string, minor uint32, numa int) {
	d.t.Helper()
	fn := fmt.Sprintf("sys/devices/pci0000:00/0000:00:%02x.%x", minor>>3, minor&7)
	dev := filepath.Join(fn, "accel", filepath.Base(rel))
	d.HostFile(filepath.Join(fn, "uevent"), "")
	d.HostFile(filepath.Join(fn, "numa_node"), fmt.Sprintf("%d\n", numa))
	d.HostFile(filepath.Join(dev, "uevent"), "")
	link := filepath.Join(d.Host, fmt.Sprintf("sys/dev/char/60:%d", minor))
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("../..", dev[len("sys/"):]), link); err != nil {
		d.t.Fatal(err)
	}
	d.Mknod(rel, minor)
}
