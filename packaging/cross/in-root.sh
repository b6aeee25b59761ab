#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# packaging/cross/in-root.sh STEP...: the part of packaging/cross.sh that
# runs inside its Debian 12 build root, on the source tree it copied to
# /src/cdiplug-VERSION. Steps: deb, rpm, test, rootfs. What it makes goes to
# /src/out. cross.sh passes ARCH, TRIPLET, RPM_ARCH, LDSO, ELF_MACHINE and
# VERSION in the environment. Ends with "in-root: N passed, M failed".
# shellcheck disable=SC2317 # the check functions run through check "$@"; shellcheck 0.9 takes them for unreachable
set -uo pipefail

src=/src/cdiplug-$VERSION
out=/src/out
work=/src/work
rm -rf "$out" "$work" && mkdir -p "$out" "$work/logs" || exit 1
jobs=$(nproc)
cross=0
toolchain=
if [ "$ARCH" != "$(dpkg --print-architecture)" ]; then
	cross=1
	toolchain=$src/packaging/cross/$TRIPLET.cmake
fi

# shellcheck source=packaging/lib/check.sh
. "$src/packaging/lib/check.sh" || exit 1
check_logs=$work/logs
passed=0
failed=0
# is_arch FILE: FILE is an ELF program for ARCH.
is_arch() {
	file -L "$1"
	file -L "$1" | grep -q "ELF 64-bit LSB .*, $ELF_MACHINE,"
}

# runs BIN CONFIG: the program answers `version` and accepts CONFIG
# (under qemu for another architecture, through binfmt_misc).
runs() {
	"$1" version | tee "$work/version.out" || return 1
	grep -q "^cdiplug $VERSION " "$work/version.out" || { echo "wrong version"; return 1; }
	"$1" check --config "$2"
}

# ------------------------------------------------------------------ deb --

deb=$out/cdiplug_${VERSION}_$ARCH.deb

build_deb() {
	local opts=(-b -us -uc)
	if [ "$cross" = 1 ]; then
		opts+=("-a$ARCH" "-Pcross,nocheck")
	else
		opts+=("-Pnocheck")
	fi
	(cd "$src" && DEB_BUILD_OPTIONS="parallel=$jobs nocheck" dpkg-buildpackage "${opts[@]}") || return 1
	cp "/src/cdiplug_${VERSION}_$ARCH.deb" "$out/"
}

deb_is_arch() {
	dpkg-deb -I "$deb"
	[ "$(dpkg-deb -f "$deb" Architecture)" = "$ARCH" ] || { echo "Architecture is not $ARCH"; return 1; }
	# shlibs must name ARCH's libraries (for arm64 they come from the
	# multiarch install, not the build machine's).
	dpkg-deb -f "$deb" Depends | grep -q 'libgrpc29' || { echo "no libgrpc29 in Depends"; return 1; }
	rm -rf "$work/debx" && dpkg-deb -x "$deb" "$work/debx" && is_arch "$work/debx/usr/bin/cdiplug"
}

# Installed into the root (ARCH's libraries are there), run, purged.
deb_runs() {
	dpkg -i "$deb" || return 1
	local rc=0
	runs /usr/bin/cdiplug /etc/cdiplug/config.json || rc=1
	dpkg -P cdiplug || rc=1
	[ ! -e /usr/bin/cdiplug ] || { echo "/usr/bin/cdiplug left after purge"; rc=1; }
	return "$rc"
}

# ------------------------------------------------------------------ rpm --

rpm=$out/cdiplug-$VERSION-1.$RPM_ARCH.rpm

# As packaging/ci-check.sh builds it (--nodeps, brp-compress with bash),
# for rpm's RPM_ARCH target. The spec's %cmake is plain cmake there, which
# takes the toolchain file from the environment; strip must be ARCH's.
build_rpm() {
	local top=$work/rpm
	mkdir -p "$top/SOURCES" "$top/tar" || return 1
	cp -a "$src" "$top/tar/" && rm -rf "$top/tar/cdiplug-$VERSION/debian" || return 1
	tar -C "$top/tar" -czf "$top/SOURCES/cdiplug-$VERSION.tar.gz" "cdiplug-$VERSION" || return 1
	local defs=(--define "_topdir $top"
		--define '__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}')
	if [ "$cross" = 1 ]; then
		defs+=(--define "__strip $TRIPLET-strip" --define "__objdump $TRIPLET-objdump")
		export CMAKE_TOOLCHAIN_FILE=$toolchain
	fi
	rpmbuild -bb --nodeps --target "$RPM_ARCH" "${defs[@]}" "$src/packaging/cdiplug.spec" || return 1
	cp "$top/RPMS/$RPM_ARCH/cdiplug-$VERSION-1.$RPM_ARCH.rpm" "$out/"
}

rpm_is_arch() {
	rpm -qpi "$rpm"
	[ "$(rpm -qp --qf '%{ARCH}' "$rpm")" = "$RPM_ARCH" ] || { echo "ARCH is not $RPM_ARCH"; return 1; }
	rm -rf "$work/rpmx" && mkdir -p "$work/rpmx" || return 1
	(cd "$work/rpmx" && rpm2cpio "$rpm" | cpio -idm --quiet) || return 1
	is_arch "$work/rpmx/usr/bin/cdiplug"
}

rpm_runs() {
	runs "$work/rpmx/usr/bin/cdiplug" "$work/rpmx/etc/cdiplug/config.json"
}

# ---------------------------------------------------------------- tests --

# The unit tests but two: test_sandbox and test_kube_sandbox lock a child
# down with seccomp, which under qemu user-mode emulation is not meaningful
# (the filter would judge qemu's own host system calls, not the arm64
# program's), and the lock-down's single-thread check refuses anyway:
# qemu runs threads of its own in every process. The real kernel runs them
# in the amd64 CI.
skip_tests='^test_(kube_)?sandbox$'

build_tests() {
	local b=$work/build-test targets=(cdiplug test_golden) f n
	for f in "$src"/tests/unit/test_*.c "$src"/tests/fuzz/fuzz_*.c; do
		n=$(basename "$f" .c)
		case "$n" in
		fuzz_*) targets+=("fuzz-replay-${n#fuzz_}") ;;
		*) targets+=("$n") ;;
		esac
	done
	local opts=(-DCDIPLUG_WERROR=ON)
	[ "$cross" = 1 ] && opts+=(-DCMAKE_TOOLCHAIN_FILE="$toolchain")
	cmake -S "$src" -B "$b" "${opts[@]}" || return 1
	cmake --build "$b" --parallel "$jobs" --target "${targets[@]}"
}

unit_tests() {
	(cd "$work/build-test" && ctest -L unit -E "$skip_tests" -j"$jobs" --timeout 300 --output-on-failure)
}

golden_test() {
	(cd "$work/build-test" && ctest -R '^test_golden$' --timeout 300 --output-on-failure)
}

# version, check and generate on a fake host tree with one serial adapter.
cli() {
	local bin=$work/build-test/cdiplug t=$work/cli
	rm -rf "$t" && mkdir -p "$t/host/dev" "$t/cdi" || return 1
	mknod "$t/host/dev/ttyUSB0" c 188 0 || return 1
	cat >"$t/config.json" <<-'EOF'
		{ "resources": [ { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" } ] } ] }
	EOF
	runs "$bin" "$t/config.json" || return 1
	"$bin" check --config "$t/config.json" --host-root "$t/host" || return 1
	"$bin" generate --config "$t/config.json" --host-root "$t/host" --cdi-dir "$t/cdi" || return 1
	cat "$t/cdi/example.com-serial.json"
	grep -q '"path":[[:space:]]*"/dev/ttyUSB0"' "$t/cdi/example.com-serial.json" ||
		{ echo "the spec does not name /dev/ttyUSB0"; return 1; }
	# A bad configuration: the field named, exit status 2, nothing written.
	echo '{ "resources": [ { "name": "bad name" } ] }' >"$t/bad.json"
	local rc=0
	"$bin" check --config "$t/bad.json" || rc=$?
	[ "$rc" = 2 ] || { echo "check of a bad configuration: exit $rc, not 2"; return 1; }
}

# ---------------------------------------------------------- image rootfs --

rootfs() {
	local r=$out/rootfs-$ARCH bin=$work/debx/usr/bin/cdiplug
	[ -x "$bin" ] || { echo "no binary from the .deb"; return 1; }
	if [ "$cross" = 1 ]; then
		CDIPLUG_MULTIARCH=$TRIPLET CDIPLUG_LDSO=$LDSO \
			sh "$src/deploy/collect-runtime.sh" "$bin" "$r" "$src/packaging/config.json" || return 1
	else
		sh "$src/deploy/collect-runtime.sh" "$bin" "$r" "$src/packaging/config.json" || return 1
	fi
	du -sh "$r"
	find "$r" -type f | sed "s|^$r||" | sort
	# The image's whole user space: nothing from the root is reachable.
	env -i /usr/sbin/chroot "$r" /usr/bin/cdiplug version &&
		env -i /usr/sbin/chroot "$r" /usr/bin/cdiplug check --config /etc/cdiplug/config.json
}

for step in "$@"; do
	case "$step" in
	deb)
		if check "deb: dpkg-buildpackage ($ARCH)" build_deb; then
			check "deb: Architecture $ARCH, $ELF_MACHINE binary" deb_is_arch
			check "deb: installs, runs version and check, purges" deb_runs
		fi
		;;
	rpm)
		if check "rpm: rpmbuild --target $RPM_ARCH" build_rpm; then
			check "rpm: ARCH $RPM_ARCH, $ELF_MACHINE binary" rpm_is_arch &&
				check "rpm: its binary runs version and check" rpm_runs
		fi
		;;
	test)
		if check "tests: unit tests built for $ARCH" build_tests; then
			check "tests: ctest -L unit (but the seccomp ones) on $ARCH" unit_tests
			check "tests: golden files from generate on $ARCH" golden_test
			check "cli: version, check, generate on $ARCH" cli
		fi
		;;
	rootfs)
		check "image: scratch root file system runs cdiplug (chroot, $ARCH)" rootfs
		;;
	*)
		echo "unknown step $step"
		failed=$((failed + 1))
		;;
	esac
done
grep -h '^\(100% tests passed\|[0-9]*% tests passed\)' "$work"/logs/*.log 2>/dev/null | sed 's/^/      ctest: /'
echo "in-root: $passed passed, $failed failed"
