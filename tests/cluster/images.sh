# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The test cluster's images, made here from the build and Debian's packages
# and imported into containerd by cluster.sh; no registry is used:
#
#   images_make BIN CDIPLUG TOP OUT
#
# OUT/cdiplug.tar  localhost/cdiplug:test, the image deploy/ ships: the root
#                  file system deploy/collect-runtime.sh makes from CDIPLUG,
#                  with deploy/Containerfile.rootfs's config;
# OUT/busybox.tar  localhost/busybox:test, Debian's static busybox;
# OUT/pause.tar    localhost/pause:test, the sandbox image (BIN/pause).
images_make() {
        local bin=$1 cdiplug=$2 top=$3 out=$4 a
        rm -rf "$out/rootfs" && mkdir -p "$out/rootfs"
        sh "$top/deploy/collect-runtime.sh" "$cdiplug" "$out/rootfs/cdiplug" >/dev/null
        "$bin/ociimage" -o "$out/cdiplug.tar" -name localhost/cdiplug:test \
                -rootfs "$out/rootfs/cdiplug" -containerfile "$top/deploy/Containerfile.rootfs"

        mkdir -p "$out/rootfs/busybox/bin" "$out/rootfs/busybox/tmp"
        install -m 0755 /bin/busybox "$out/rootfs/busybox/bin/busybox"
        for a in $(/bin/busybox --list); do
                [ "$a" = busybox ] || ln -sf busybox "$out/rootfs/busybox/bin/$a"
        done
        "$bin/ociimage" -o "$out/busybox.tar" -name localhost/busybox:test \
                -rootfs "$out/rootfs/busybox" -cmd '["sh"]'

        mkdir -p "$out/rootfs/pause"
        install -m 0755 "$bin/pause" "$out/rootfs/pause/pause"
        "$bin/ociimage" -o "$out/pause.tar" -name "localhost/pause:test" \
                -rootfs "$out/rootfs/pause" -entrypoint '["/pause"]'
        rm -rf "$out/rootfs"
}
