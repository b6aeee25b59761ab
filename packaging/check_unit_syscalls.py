#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check that the unit's SystemCallFilter= allows what cdiplug itself allows.

cdiplug loads its own seccomp allowlist (sandbox/seccomp.c) while running
under the unit's SystemCallFilter=; a system call the daemon allows but the
unit refuses would fail with EPERM only when it runs under systemd, which no
test without systemd as PID 1 would see.

Usage: check_unit_syscalls.py SECCOMP_C UNIT_FILE   (needs systemd-analyze)
"""
import re
import subprocess
import sys

# What the daemon's lock-down calls before its own filter is in place.
LOCKDOWN = {"capget", "capset", "prctl", "seccomp", "setgroups", "setresuid", "setresgid"}


def group(name, seen):
    if name in seen:
        return set()
    seen.add(name)
    out = subprocess.run(["systemd-analyze", "syscall-filter", name],
                         capture_output=True, text=True, check=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        word = line.strip().split(" ")[0]
        if not word or word.startswith("#"):
            continue
        calls |= group(word, seen) if word.startswith("@") else {word}
    return calls


def expand(words):
    calls = set()
    for w in words:
        calls |= group(w, set()) if w.startswith("@") else {w}
    return calls


def daemon_allowlist(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    start = src.index("groups[] = {")
    table = src[start:src.index("};", start)]
    calls = set()
    # { "name", "who needs it", "call call ..." "call ...", SBX_ALLOW, ... }
    for m in re.finditer(r'\{\s*"[^"]+",\s*"[^"]*",\s*((?:"[^"]*"\s*)+),\s*(SBX_\w+)', table):
        if m.group(2) == "SBX_ALLOW":
            calls |= set(" ".join(re.findall(r'"([^"]*)"', m.group(1))).split())
    return calls


def unit_filter(path):
    allowed, denied = set(), set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("SystemCallFilter="):
                continue
            words = line.split("=", 1)[1].split()
            if words and words[0].startswith("~"):
                denied |= expand([words[0][1:]] + words[1:])
            else:
                allowed |= expand(words)
    return allowed, denied


def main(argv):
    try:
        daemon = daemon_allowlist(argv[0])
    except (OSError, ValueError) as e:
        print("cannot read the allowlist from %s: %s" % (argv[0], e))
        return 1
    if len(daemon) < 20:
        print("found only %d system calls in %s: its table changed shape, update %s"
              % (len(daemon), argv[0], sys.argv[0]))
        return 1
    daemon |= LOCKDOWN
    allowed, denied = unit_filter(argv[1])
    if not allowed:
        print("the unit has no SystemCallFilter= allow list")
        return 1
    bad = sorted((daemon - allowed) | (daemon & denied))
    print("cdiplug allows %d system calls; the unit refuses: %s"
          % (len(daemon), " ".join(bad) if bad else "none of them"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
