// SPDX-License-Identifier: Apache-2.0

// ociimage writes a one-layer image as an OCI image layout tarball, the
// form `ctr images import` reads, so that the test cluster needs no
// registry and no image builder:
//
//	ociimage -o OUT.tar -name REF -rootfs DIR [-containerfile FILE]
//	         [-entrypoint JSON] [-cmd JSON]
//
// The layer is DIR as it is (owners, modes, symlinks, hard links kept as
// copies). With -containerfile, the image config takes ENTRYPOINT, CMD,
// USER, EXPOSE and LABEL from a FROM-scratch Containerfile whose only other
// step copies the root file system (deploy/Containerfile.rootfs), so the
// image is the one that file describes.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
)

type imageConfig struct {
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	User         string              `json:"User,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func main() {
	out := flag.String("o", "", "the OCI layout tarball to write")
	name := flag.String("name", "", "the image reference, e.g. localhost/busybox:test")
	rootfs := flag.String("rootfs", "", "the directory that becomes the layer")
	containerfile := flag.String("containerfile", "", "a FROM-scratch Containerfile to take the config from")
	entrypoint := flag.String("entrypoint", "", "ENTRYPOINT as a JSON array")
	cmd := flag.String("cmd", "", "CMD as a JSON array")
	flag.Parse()
	if *out == "" || *name == "" || *rootfs == "" {
		fmt.Fprintln(os.Stderr, "usage: ociimage -o OUT.tar -name REF -rootfs DIR [-containerfile FILE] [-entrypoint JSON] [-cmd JSON]")
		os.Exit(2)
	}
	cfg := imageConfig{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	if *containerfile != "" {
		if err := readContainerfile(*containerfile, &cfg); err != nil {
			fail(err)
		}
	}
	for _, a := range []struct {
		text string
		to   *[]string
	}{{*entrypoint, &cfg.Entrypoint}, {*cmd, &cfg.Cmd}} {
		if a.text != "" {
			if err := json.Unmarshal([]byte(a.text), a.to); err != nil {
				fail(fmt.Errorf("%q is not a JSON array of strings: %w", a.text, err))
			}
		}
	}
	if err := write(*out, *name, *rootfs, cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ociimage:", err)
	os.Exit(1)
}

// readContainerfile takes the config instructions of a FROM-scratch
// Containerfile; any instruction it does not know is an error, so that a
// step added there is not silently missing from the test image.
func readContainerfile(path string, cfg *imageConfig) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	joined := strings.ReplaceAll(string(text), "\\\n", " ")
	for n, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			if rest != "scratch" {
				return fmt.Errorf("%s:%d: FROM %s: only FROM scratch is supported", path, n+1, rest)
			}
		case "COPY":
			if rest != "rootfs/ /" {
				return fmt.Errorf("%s:%d: COPY %s: only COPY rootfs/ / is supported", path, n+1, rest)
			}
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				return fmt.Errorf("%s:%d: %s is not in JSON form: %w", path, n+1, word, err)
			}
			if strings.EqualFold(word, "CMD") {
				cfg.Cmd = v
			} else {
				cfg.Entrypoint = v
			}
		case "USER":
			cfg.User = rest
		case "EXPOSE":
			if cfg.ExposedPorts == nil {
				cfg.ExposedPorts = map[string]struct{}{}
			}
			for _, p := range strings.Fields(rest) {
				cfg.ExposedPorts[p] = struct{}{}
			}
		case "LABEL":
			if cfg.Labels == nil {
				cfg.Labels = map[string]string{}
			}
			if err := labels(rest, cfg.Labels); err != nil {
				return fmt.Errorf("%s:%d: LABEL: %w", path, n+1, err)
			}
		default:
			return fmt.Errorf("%s:%d: %s is not supported", path, n+1, word)
		}
	}
	return nil
}

// labels reads key="value" pairs; the values are double-quoted.
func labels(s string, into map[string]string) error {
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, "\"") {
			return fmt.Errorf("expected key=\"value\" at %q", s)
		}
		end := strings.Index(rest[1:], "\"")
		if end < 0 {
			return fmt.Errorf("unterminated value at %q", s)
		}
		into[key] = rest[1 : 1+end]
		s = rest[2+end:]
	}
	return nil
}

// blob adds content to the layout under its digest.
func blob(tw *tar.Writer, mediaType string, content []byte) (descriptor, error) {
	sum := sha256.Sum256(content)
	d := descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(content))}
	err := file(tw, "blobs/sha256/"+hex.EncodeToString(sum[:]), content)
	return d, err
}

func file(tw *tar.Writer, name string, content []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(content)
	return err
}

func write(out, name, rootfs string, cfg imageConfig) error {
	layer, err := layerTar(rootfs)
	if err != nil {
		return fmt.Errorf("layer from %s: %w", rootfs, err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := file(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	layerDesc, err := blob(tw, "application/vnd.oci.image.layer.v1.tar", layer)
	if err != nil {
		return err
	}
	diffID := layerDesc.Digest // uncompressed: the diff ID is the digest
	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux", "config": cfg,
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	configDesc, err := blob(tw, "application/vnd.oci.image.config.v1+json", config)
	if err != nil {
		return err
	}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": configDesc, "layers": []descriptor{layerDesc},
	})
	manifestDesc, err := blob(tw, "application/vnd.oci.image.manifest.v1+json", manifest)
	if err != nil {
		return err
	}
	manifestDesc.Annotations = map[string]string{"io.containerd.image.name": name,
		"org.opencontainers.image.ref.name": name[strings.LastIndex(name, ":")+1:]}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2,
		"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []descriptor{manifestDesc}})
	if err := file(tw, "index.json", index); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// layerTar is the tar of dir, in name order so the digest is the same for
// the same tree.
func layerTar(dir string) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := addEntry(tw, dir, p); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addEntry(tw *tar.Writer, dir, p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	link := ""
	if st.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(st, link)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(dir, p)
	h.Name = filepath.ToSlash(rel)
	if st.IsDir() {
		h.Name += "/"
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		h.Uid, h.Gid = int(sys.Uid), int(sys.Gid)
	}
	h.Uname, h.Gname = "", ""
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return nil
	}
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}
