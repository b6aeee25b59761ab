#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# packaging/ci-check.sh: build and check every packaging artifact.
#
# Run as root on Debian 12 with the project's build dependencies installed:
#   bash packaging/ci-check.sh
# It installs its own tools with apt-get, then builds the .deb (lintian,
# then a real dpkg install / remove / purge with a stray-file check), the
# .rpm (rpmlint), checks the systemd unit (systemd-analyze verify and
# security), the container image's root file system (run with chroot), and
# the Kubernetes manifests (yamllint, deploy/check_manifests.py) and the
# Helm chart's version (its rendering is tests/helm's, which needs Go).
# Ends with "packaging: N passed, M failed"; exits non-zero on any failure.
#
# Environment:
#   CDIPLUG_PKG_NO_APT=1   do not run apt-get (the tools must be there)
#   CDIPLUG_PKG_KEEP=1     keep the work directory (printed at the end)
#   CDIPLUG_PKG_SRC=DIR    package this source tree instead of the
#                          repository (for testing the packaging alone)
#   CDIPLUG_PKG_MAX_EXPOSURE=N  highest accepted systemd exposure (2.0)
# shellcheck disable=SC2317 # the check functions run through check "$@" and cleanup through trap; shellcheck 0.9 takes them for unreachable
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
src=${CDIPLUG_PKG_SRC:-$repo}
max_exposure=${CDIPLUG_PKG_MAX_EXPOSURE:-2.0}
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

# shellcheck source=packaging/lib/check.sh
. "$here/lib/check.sh" || exit 1
passed=0
failed=0
work=$(mktemp -d /tmp/cdiplug-pkg.XXXXXX)
check_logs=$work/logs
mkdir -p "$check_logs"
created_dirs=()
fake_files=()
deb_installed_by_us=0

cleanup() {
	local i
	# Whatever a failed install test left: the package and the fake
	# daemon output.
	if [ "$deb_installed_by_us" = 1 ] && [ -n "$(dpkg-query -W cdiplug 2>/dev/null)" ]; then
		dpkg -P cdiplug >/dev/null 2>&1 || true
	fi
	[ ${#fake_files[@]} -gt 0 ] && rm -f "${fake_files[@]}"
	# Directories this script made to stand in for a kubelet and a CDI
	# directory, deepest first; rmdir leaves them if anything is inside.
	for ((i = ${#created_dirs[@]} - 1; i >= 0; i--)); do
		rmdir "${created_dirs[i]}" 2>/dev/null || true
	done
	if [ "${CDIPLUG_PKG_KEEP:-}" = 1 ]; then
		echo "work directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

# first_match PATTERN-WORDS...: print the first word that names an existing
# file (an unmatched glob stays literal and does not exist), or nothing.
first_match() {
	local f
	for f in "$@"; do
		[ -e "$f" ] && { printf '%s\n' "$f"; return 0; }
	done
	return 0
}

# note NAME: count a failure found outside check().
fail() {
	failed=$((failed + 1))
	echo "FAIL  $1"
}

finish() {
	echo "packaging: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

# ------------------------------------------------------------- runner --

# lib/check.sh runs each check's command inside its own function, so a
# local of its would hide the caller's global of that name from the
# command. Proved twice: in a fresh shell, the globals that the callers'
# checks read (multiarch-image.sh's $name, others' $what, $log, $t0) reach
# a check's command unchanged; and every name the runner assigns or
# declares starts with _check_ (or is the counters passed and failed).
runner_hides_nothing() {
	local lib=$here/lib/check.sh assigned bad
	# shellcheck disable=SC2016 # the inner script's variables are its own
	bash -c 'set -u
		. "$1" || exit 1
		check_logs=$2 passed=0 failed=0
		name=image what=step log=file t0=start
		reads() { [ "$name/$what/$log/$t0" = image/step/file/start ]; }
		check "a check sees its caller'\''s globals" reads && [ "$passed/$failed" = 1/0 ]' \
		bash "$lib" "$work/logs" || return 1
	# The words after local/declare/read, NAME= anywhere, for NAME.
	assigned=$(sed 's/#.*//' "$lib" >"$work/runner.sh" && {
		sed -nE 's/^[[:space:]]*(local|declare|typeset|read)[[:space:]]+(-[a-z]+[[:space:]]+)*//p' \
			"$work/runner.sh" | tr -s '[:blank:]' '\n' | sed 's/=.*//'
		grep -oE '(^|[[:space:];(])[A-Za-z_][A-Za-z0-9_]*=' "$work/runner.sh" | tr -d ' \t;(='
		grep -oE '(^|[[:space:];])for[[:space:]]+[A-Za-z_][A-Za-z0-9_]*' "$work/runner.sh" |
			awk '{ print $NF }'
	} | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u)
	echo "assigned in $lib: $(echo "$assigned" | tr '\n' ' ')"
	bad=$(echo "$assigned" | grep -vE '^(_check_[A-Za-z0-9_]*|passed|failed)$')
	[ -z "$bad" ] || { echo "not prefixed with _check_: $bad"; return 1; }
}
check "runner: a check's command sees its caller's globals" runner_hides_nothing

# ---------------------------------------------------------------- tools --

tools=(debhelper dpkg-dev fakeroot lintian rpm rpmlint systemd man-db
       yamllint python3 python3-yaml file binutils build-essential)
install_tools() {
	local missing=()
	for p in "${tools[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && { echo "all tools present"; return 0; }
	if [ "${CDIPLUG_PKG_NO_APT:-}" = 1 ]; then
		echo "missing: ${missing[*]}"
		return 1
	fi
	apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"
}
check "tools installed" install_tools || finish

version=$(sed -n 's/^project(cdiplug VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
echo "cdiplug version $version (from $src/CMakeLists.txt)"

versions_agree() {
	local deb_v spec_v chart=$repo/deploy/helm/cdiplug/Chart.yaml chart_v app_v
	deb_v=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
	spec_v=$(sed -n 's/^Version:[[:space:]]*//p' "$here/cdiplug.spec")
	chart_v=$(sed -n 's/^version:[[:space:]]*//p' "$chart")
	app_v=$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart")
	echo "CMake $version, debian/changelog $deb_v, cdiplug.spec $spec_v, Helm chart $chart_v (app $app_v)"
	if [ -z "$version" ] || [ "${deb_v%%-*}" != "$version" ] || [ "$spec_v" != "$version" ] ||
		[ "$chart_v" != "$version" ] || [ "$app_v" != "$version" ]; then
		echo "bump packaging/debian/changelog, packaging/cdiplug.spec and deploy/helm/cdiplug/Chart.yaml (version, appVersion) to $version"
		return 1
	fi
}
check "package and chart versions match CMake's project version" versions_agree

# A copy of the source tree as it would be committed: git's view when there
# is one (tracked plus untracked-but-not-ignored files), else everything but
# .git and build trees.
copy_source() {
	local dest=$1
	mkdir -p "$dest"
	if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$src" && git ls-files -co --exclude-standard -z |
			while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
			tar --null -T - -cf -) | tar -C "$dest" -xf -
	else
		tar -C "$src" -h --exclude=.git --exclude='./build*' -cf - . | tar -C "$dest" -xf -
	fi
}

# ------------------------------------------------------------------ deb --

debdir="$work/deb"
debsrc="$debdir/cdiplug-$version"

build_deb() {
	copy_source "$debsrc" || return 1
	rm -rf "$debsrc/debian"
	cp -a "$here/debian" "$debsrc/debian"
	(cd "$debsrc" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -us -uc)
}
check "deb: dpkg-buildpackage" build_deb
deb=$(first_match "$debdir"/cdiplug_"$version"_*.deb)
changes=$(first_match "$debdir"/cdiplug_"$version"_*.changes)

run_lintian() {
	lintian --fail-on error --display-info "$changes" | tee "$work/lintian.txt"
	local rc=${PIPESTATUS[0]}
	echo "lintian exit $rc; tags: $(grep -c '^[EWIP]:' "$work/lintian.txt")"
	return "$rc"
}

deb_contents() {
	local listing
	listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
	echo "$listing"
	for f in ./usr/bin/cdiplug ./usr/share/man/man8/cdiplug.8.gz \
		./etc/cdiplug/config.json ./lib/systemd/system/cdiplug.service \
		./usr/share/doc/cdiplug/copyright ./usr/share/bash-completion/completions/cdiplug \
		./usr/share/doc/cdiplug/examples/config.json; do
		grep -qx -- "$f" <<<"$listing" || { echo "missing $f"; return 1; }
	done
	dpkg-deb -e "$deb" "$work/debctl"
	grep -qx /etc/cdiplug/config.json "$work/debctl/conffiles" || { echo "config.json is no conffile"; return 1; }
	# Not enabled on install, but stopped before removal.
	grep -q "deb-systemd-invoke stop 'cdiplug.service'" "$work/debctl/prerm" ||
		{ echo "prerm does not stop the service"; return 1; }
	grep -q "deb-systemd-helper enable" "$work/debctl/postinst" &&
		! grep -q "was-enabled" "$work/debctl/postinst" &&
		{ echo "postinst enables the service"; return 1; }
	for s in "$work"/debctl/{preinst,postinst,prerm,postrm}; do
		[ -e "$s" ] && { sh -n "$s" || return 1; }
	done
	return 0
}

# Every file and directory outside the places that change on their own.
snapshot() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run \
		-o -path /tmp -o -path /var/tmp -o -path /var/log -o -path /var/cache \
		-o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/backups \
		-o -path /root -o -path /home -o -path /work -o -path "$repo" \
		-o -path "$src" -o -path /etc/ld.so.cache \) -prune -o -print 2>/dev/null | sort
}

make_dir() { # make_dir DIR: mkdir -p, remembering what was new
	local d=$1 missing=()
	while [ ! -d "$d" ]; do missing=("$d" "${missing[@]}"); d=$(dirname "$d"); done
	for d in "${missing[@]}"; do mkdir "$d" && created_dirs+=("$d"); done
}

kdir=/var/lib/kubelet/device-plugins
cdir=/etc/cdi

# What a running daemon would leave behind, plus bystanders that must
# survive: another plugin's socket, another tool's CDI spec, and a file
# that a hostile ownership record names with "..".
fake_daemon_output() {
	fake_files=("$kdir/cdiplug-example.com-serial.sock" "$kdir/other-vendor.sock"
		"$cdir/example.com-serial.json" "$cdir/other.com-gpu.json" "$cdir/.cdiplug-tmp.x1y2z3"
		"$cdir/.cdiplug-owned" /etc/cdiplug-canary.json)
	python3 - "$kdir" <<'EOF' || return 1
import socket, sys
for name in ("cdiplug-example.com-serial.sock", "other-vendor.sock"):
    s = socket.socket(socket.AF_UNIX)
    s.bind(sys.argv[1] + "/" + name)
    s.close()
EOF
	echo '{"cdiVersion":"0.3.0","kind":"example.com/serial","devices":[]}' >"$cdir/example.com-serial.json"
	echo '{"cdiVersion":"0.3.0","kind":"other.com/gpu","devices":[]}' >"$cdir/other.com-gpu.json"
	echo '{}' >"$cdir/.cdiplug-tmp.x1y2z3"
	echo canary >/etc/cdiplug-canary.json
	printf '%s\n' "# cdiplug: CDI spec files in this directory that cdiplug wrote and may" \
		"# replace or remove. One file name per line. Do not edit." \
		example.com-serial.json ../cdiplug-canary.json .hidden.json >"$cdir/.cdiplug-owned"
}

deb_lifecycle() {
	local before="$work/fs-before" after="$work/fs-after" f bad=0
	if dpkg-query -W -f='${Status}\n' cdiplug 2>/dev/null | grep -qv 'not-installed'; then
		echo "cdiplug is installed already; purging it first"
		dpkg -P cdiplug || return 1
	fi
	# Runtime dependencies first, so that the snapshots differ by
	# cdiplug alone.
	apt-get satisfy -y --no-install-recommends "$(dpkg-deb -f "$deb" Depends)" || return 1
	make_dir "$kdir"
	make_dir "$cdir"
	snapshot >"$before"

	echo "== dpkg -i"
	deb_installed_by_us=1
	dpkg -i "$deb" || return 1
	dpkg -L cdiplug
	local excl_man=0
	grep -rqs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/ && excl_man=1
	while IFS= read -r f; do
		[ -e "$f" ] && continue
		[ "$excl_man" = 1 ] && [[ "$f" == /usr/share/man/* ]] && continue
		echo "listed but missing: $f"; bad=1
	done < <(dpkg -L cdiplug)
	/usr/bin/cdiplug version || bad=1
	echo "== cdiplug check on the shipped example configuration"
	/usr/bin/cdiplug check --config /etc/cdiplug/config.json || bad=1
	echo "== systemd-analyze verify (installed unit, and packaging/cdiplug.service)"
	systemd-analyze verify --man=no /lib/systemd/system/cdiplug.service || bad=1
	systemd-analyze verify --man=no "$here/cdiplug.service" || bad=1
	[ "$bad" = 0 ] || return 1

	fake_daemon_output || return 1
	echo "== dpkg -r"
	dpkg -r cdiplug || return 1
	dpkg-query -W -f='${Status}\n' cdiplug | grep -qx 'deinstall ok config-files' || { echo "status after remove"; bad=1; }
	for f in /usr/bin/cdiplug /lib/systemd/system/cdiplug.service /usr/share/man/man8/cdiplug.8.gz \
		"$kdir/cdiplug-example.com-serial.sock"; do
		[ -e "$f" ] && { echo "left after remove: $f"; bad=1; }
	done
	for f in /etc/cdiplug/config.json "$kdir/other-vendor.sock" "$cdir/example.com-serial.json"; do
		[ -e "$f" ] || { echo "remove took $f"; bad=1; }
	done

	echo "== dpkg -P"
	dpkg -P cdiplug || return 1
	dpkg-query -W -f='${Status}\n' cdiplug 2>/dev/null | grep -q 'not-installed' ||
		[ -z "$(dpkg-query -W cdiplug 2>/dev/null)" ] || { echo "still known to dpkg"; bad=1; }
	for f in /etc/cdiplug "$cdir/example.com-serial.json" "$cdir/.cdiplug-owned" "$cdir/.cdiplug-tmp.x1y2z3"; do
		[ -e "$f" ] && { echo "left after purge: $f"; bad=1; }
	done
	for f in /etc/cdiplug-canary.json "$cdir/other.com-gpu.json" "$kdir/other-vendor.sock"; do
		[ -e "$f" ] || { echo "purge took a bystander: $f"; bad=1; }
	done
	rm -f "${fake_files[@]}"
	fake_files=()

	snapshot >"$after"
	echo "== files that differ from before the installation"
	if ! diff "$before" "$after"; then
		bad=1
	else
		echo "(none)"
	fi
	return "$bad"
}

if [ -n "$deb" ]; then
	check "deb: lintian reports no errors" run_lintian
	check "deb: contents, conffile, maintainer scripts parse" deb_contents
	check "deb: install, run, remove, purge; no stray files" deb_lifecycle
else
	fail "deb: no .deb was built, skipping lintian and install tests"
fi

# ------------------------------------------------------------------ rpm --

rpmtop="$work/rpm"
build_rpm() {
	mkdir -p "$rpmtop/SOURCES" "$rpmtop/tar" || return 1
	copy_source "$rpmtop/tar/cdiplug-$version" || return 1
	tar -C "$rpmtop/tar" -czf "$rpmtop/SOURCES/cdiplug-$version.tar.gz" "cdiplug-$version" || return 1
	# --nodeps: Debian's rpm database knows none of the BuildRequires.
	# brp-compress is a bash script with a /bin/sh line on Debian.
	rpmbuild -ba --nodeps --define "_topdir $rpmtop" \
		--define '__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}' \
		"$here/cdiplug.spec"
}
check "rpm: rpmbuild" build_rpm
rpmfile=$(first_match "$rpmtop"/RPMS/*/cdiplug-"$version"-*.rpm)
srpm=$(first_match "$rpmtop"/SRPMS/cdiplug-"$version"-*.src.rpm)

run_rpmlint() {
	rpmlint -c "$here/rpmlint.toml" "$rpmfile" "$srpm" "$here/cdiplug.spec" | tee "$work/rpmlint.txt"
	local rc=${PIPESTATUS[0]}
	# rpmlint exits 64 on errors, 66 when badness exceeds the threshold.
	grep -q ' 0 errors' "$work/rpmlint.txt" && [ "$rc" -eq 0 ]
}

rpm_contents() {
	local listing
	listing=$(rpm -qlp "$rpmfile")
	echo "$listing"
	for f in /usr/bin/cdiplug /usr/share/man/man8/cdiplug.8.gz /etc/cdiplug/config.json \
		/usr/lib/systemd/system/cdiplug.service /usr/share/bash-completion/completions/cdiplug \
		/usr/share/doc/cdiplug/examples/config.json; do
		grep -qx -- "$f" <<<"$listing" || { echo "missing $f"; return 1; }
	done
	rpm -qpc "$rpmfile" | grep -qx /etc/cdiplug/config.json || { echo "config.json is no %config"; return 1; }
	# Each scriptlet must at least parse.
	rpm -qp --queryformat '%{POSTIN}\n' "$rpmfile" | sh -n &&
		rpm -qp --queryformat '%{PREUN}\n' "$rpmfile" | sh -n &&
		rpm -qp --queryformat '%{POSTUN}\n' "$rpmfile" | sh -n
}

if [ -n "$rpmfile" ]; then
	check "rpm: rpmlint reports no errors" run_rpmlint
	check "rpm: contents, %config, scriptlets parse" rpm_contents
else
	fail "rpm: no .rpm was built, skipping rpmlint"
fi

# --------------------------------------------------------- systemd unit --

exposure() {
	systemd-analyze security --offline=yes --no-pager "$here/cdiplug.service" | tee "$work/security.txt"
	score=$(sed -n 's/.*Overall exposure level for cdiplug.service: \([0-9.]*\).*/\1/p' "$work/security.txt")
	echo "exposure $score (accepted up to $max_exposure)"
	[ -n "$score" ] && awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s <= m) }' || return 1
	grep -q "Exposure level: $score " "$here/README.md" || {
		echo "packaging/README.md does not state 'Exposure level: $score ...': update it"
		return 1
	}
}
score=
check "unit: systemd-analyze security exposure" exposure
[ -n "$score" ] && echo "      exposure level $score"

if [ -f "$src/sandbox/seccomp.c" ]; then
	check "unit: SystemCallFilter= allows every call cdiplug's own filter allows" \
		python3 "$here/check_unit_syscalls.py" "$src/sandbox/seccomp.c" "$here/cdiplug.service"
fi

man_page() {
	local out
	# The installed page has the version filled in by configure_file().
	sed "s/@PROJECT_VERSION@/$version/" "$here/cdiplug.8.in" >"$work/cdiplug.8"
	out=$(MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$work/cdiplug.8" 2>&1 >/dev/null)
	echo "$out"
	[ -z "$out" ]
}
check "man: cdiplug.8 renders without groff warnings" man_page

# ------------------------------------------------------------ container --

container_rootfs() {
	local b="$work/ctr-build" rootfs="$work/rootfs" bin="$debsrc/debian/cdiplug/usr/bin/cdiplug"
	# The deb build's stripped binary is what the image's build stage
	# makes too; build one only when that is missing.
	if [ ! -x "$bin" ]; then
		cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDIPLUG_TESTS=OFF >/dev/null || return 1
		cmake --build "$b" --parallel "$(nproc)" >/dev/null || return 1
		strip --strip-unneeded "$b/cdiplug" || return 1
		bin="$b/cdiplug"
	fi
	sh "$repo/deploy/collect-runtime.sh" "$bin" "$rootfs" "$here/config.json" || return 1
	du -sh "$rootfs"
	find "$rootfs" -type f | sed "s|^$rootfs||" | sort
	# The image's whole user space: nothing from the host is reachable.
	env -i /usr/sbin/chroot "$rootfs" /usr/bin/cdiplug version &&
		env -i /usr/sbin/chroot "$rootfs" /usr/bin/cdiplug check --config /etc/cdiplug/config.json
}
check "container: scratch root file system runs cdiplug (chroot)" container_rootfs

# Every folder the top-level CMakeLists adds (but tests/) is copied into
# the build stage, and every COPY source exists.
containerfile_copies() {
	local cf="$repo/deploy/Containerfile" d rc=0
	while read -r d; do
		[ "$d" = tests ] && continue
		grep -q "^COPY $d/ $d/\$" "$cf" || { echo "deploy/Containerfile does not COPY $d/"; rc=1; }
	done < <(sed -n 's/^[[:space:]]*add_subdirectory(\([^) ]*\)).*/\1/p' "$repo/CMakeLists.txt")
	while read -r d; do
		[ -e "$repo/$d" ] || { echo "COPY source $d does not exist"; rc=1; }
	done < <(awk '$1 == "COPY" && $2 !~ /^--/ { for (i = 2; i < NF; i++) print $i }' "$cf")
	grep -E '^FROM ' "$cf"
	grep -E '^FROM ' "$cf" | grep -vqE '^FROM (\$\{DEBIAN_IMAGE\}|scratch)( |$)' &&
		{ echo "only Debian images and scratch"; rc=1; }
	grep -q '^ARG DEBIAN_IMAGE=debian:12$' "$cf" || { echo "base is not debian:12"; rc=1; }
	return "$rc"
}
check "container: Containerfile copies every built folder" containerfile_copies

# deploy/Containerfile.rootfs (the multi-arch image, deploy/multiarch-image.sh)
# is the Containerfile's final stage for a root file system made beforehand:
# the same labels, port, user, entry point and command.
containerfile_rootfs_agrees() {
	local a="$work/final-stage" b="$work/rootfs-stage"
	sed -n '/^FROM scratch$/,$p' "$repo/deploy/Containerfile" | grep -v '^COPY ' >"$a"
	sed -n '/^FROM scratch$/,$p' "$repo/deploy/Containerfile.rootfs" | grep -v '^COPY ' >"$b"
	[ -s "$a" ] || { echo "no FROM scratch stage in deploy/Containerfile"; return 1; }
	diff "$a" "$b" || return 1
	grep -qx 'COPY rootfs/ /' "$repo/deploy/Containerfile.rootfs"
}
check "container: Containerfile.rootfs is the Containerfile's final stage" containerfile_rootfs_agrees

# ----------------------------------------------------------- manifests --

check "deploy: yamllint" yamllint -s -c "$repo/deploy/.yamllint" "$repo/deploy"
check "deploy: kustomize base renders and is locked down" python3 "$repo/deploy/check_manifests.py"
[ -f "$work/logs/deploy__kustomize_base_renders_and_is_locked_down.log" ] &&
	grep -E '^manifests:' "$work/logs/deploy__kustomize_base_renders_and_is_locked_down.log" | sed 's/^/      /'

# What `cdiplug manifests` prints for a DRA configuration: the API schema
# subset, RBAC and deploy/base's lock-down (deploy/check_dra_manifests.py).
dra_manifests() {
	local bin="$debsrc/debian/cdiplug/usr/bin/cdiplug" cfg="$work/dra-config.json"
	[ -x "$bin" ] || bin="$work/ctr-build/cdiplug"
	[ -x "$bin" ] || { echo "no cdiplug binary built (deb or container check)"; return 1; }
	cat >"$cfg" <<-'EOF'
		{ "dra": { "driver": "cdiplug.example.com" },
		  "resources": [
		    { "name": "example.com/serial", "match": [ { "path": "/dev/ttyUSB*" } ], "api": "dra" },
		    { "name": "example.com/fuse", "match": [ { "path": "/dev/fuse" } ], "shares": 8 } ] }
	EOF
	"$bin" manifests --config "$cfg" >"$work/dra-manifests.yaml" || return 1
	python3 "$repo/deploy/check_dra_manifests.py" "$work/dra-manifests.yaml"
}
check "deploy: cdiplug manifests (DRA) validates and is locked down" dra_manifests

# -------------------------------------------------------------- summary --

if [ -f "$work/lintian.txt" ]; then
	echo "lintian tags:"
	grep -E '^[EWIPX]: ' "$work/lintian.txt" | sed 's/^/      /' || echo "      (none)"
fi
if [ -f "$work/rpmlint.txt" ]; then
	echo "rpmlint:"
	grep -E ': [EW]: |errors,' "$work/rpmlint.txt" | sed 's/^/      /'
fi
finish
