// What the chart is held to: the objects `cdiplug manifests` prints (DRA)
// and deploy/base renders (device plugins), and the offline validation
// both already pass (deploy/check_dra_manifests.py, check_manifests.py).
package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// cdiplug is the binary under test: CDIPLUG, set by run.sh.
func cdiplug(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CDIPLUG")
	if bin == "" {
		t.Fatal("CDIPLUG is not set: run tests/helm/run.sh BUILD_DIR")
	}
	return bin
}

// run runs a command: its stdout, stderr and exit status (-1 when it could
// not start, which fails the test).
func run(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// manifests runs `cdiplug manifests --config FILE OPTIONS...` on a config's
// text: its objects, or its stderr and exit status when it refuses.
func manifests(t *testing.T, config string, opts ...string) ([]object, string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, rc := run(t, cdiplug(t), append([]string{"manifests", "--config", path}, opts...)...)
	if rc != 0 {
		return nil, errOut, rc
	}
	return parseStream(t, out), errOut, 0
}

// base renders deploy/base as deploy/check_manifests.py does (the same
// renderer its checks use, itself cross-checked with kubectl kustomize).
func base(t *testing.T) []object {
	t.Helper()
	out, errOut, rc := run(t, "python3", "-B", filepath.Join(top(t), "deploy", "check_manifests.py"),
		"--render", filepath.Join(top(t), "deploy", "base"))
	if rc != 0 {
		t.Fatalf("deploy/check_manifests.py --render: exit %d\n%s%s", rc, out, errOut)
	}
	return parseStream(t, out)
}

// validate passes a rendering through the offline checks of the objects
// it stands in for: check_dra_manifests.py for DRA, check_manifests.py
// --rendered for device plugins.
func validate(t *testing.T, manifest string, dra bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chart.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(top(t), "deploy", "check_manifests.py"), "--rendered", path}
	if dra {
		args = []string{filepath.Join(top(t), "deploy", "check_dra_manifests.py"), path}
	}
	out, errOut, rc := run(t, "python3", append([]string{"-B"}, args...)...)
	if rc != 0 {
		t.Errorf("%s: exit %d\n%s%s\nthe rendering:\n%s", filepath.Base(args[0]), rc, out, errOut, manifest)
	}
}
