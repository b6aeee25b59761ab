# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# packaging/lib/check.sh: the step runner of packaging/ci-check.sh,
# packaging/cross.sh, packaging/cross/in-root.sh and
# deploy/multiarch-image.sh; sourced, never run.
#
# check NAME CMD...: run CMD with its output in $check_logs/NAME.log (the
# caller sets check_logs, a directory that exists); count it in the caller's
# globals passed or failed; print "ok    NAME (N s)", or "FAIL  NAME" and the
# log's last 60 lines. Returns CMD's success, so a caller can stop
# (`check ... || finish`) or go on.
#
# CMD runs inside check, and bash's locals are dynamic: a function CMD calls
# that reads a global sees, instead, a local of the same name of any
# function up the stack. So every local here starts with _check_, which no
# caller uses: a `local name` here once hid deploy/multiarch-image.sh's
# global $name (the image its checks inspect). ci-check.sh's first check
# proves it.

check() {
	local _check_name=$1 _check_log _check_t0=$SECONDS
	shift
	_check_log=$(printf '%s' "$_check_name" | tr -c 'A-Za-z0-9_.-' '_')
	_check_log="${check_logs:?the caller sets check_logs}/$_check_log.log"
	if "$@" >"$_check_log" 2>&1; then
		passed=$((passed + 1))
		echo "ok    $_check_name ($((SECONDS - _check_t0)) s)"
		return 0
	fi
	failed=$((failed + 1))
	echo "FAIL  $_check_name"
	tail -n 60 "$_check_log" | sed 's/^/      | /'
	return 1
}
