# SPDX-License-Identifier: Apache-2.0
# CMake toolchain file for an arm64 (aarch64) build on an amd64 Debian 12
# with the cross compiler (crossbuild-essential-arm64) and the build
# dependencies installed for arm64 by multiarch (libgrpc-dev:arm64, ...).
# packaging/cross.sh makes such a root and uses this file; see
# packaging/README.md. No sysroot: Debian's multiarch puts the arm64
# headers and libraries in their own directories, which the cross compiler
# searches by default.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# pkgconf's cross personality (pkgconf:arm64) reads the arm64 .pc files.
set(PKG_CONFIG_EXECUTABLE aarch64-linux-gnu-pkg-config CACHE FILEPATH "")
# protoc-c runs on the build machine; libraries and headers come from arm64.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# ctest runs the arm64 test programs under qemu user-mode emulation.
find_program(CDIPLUG_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(CDIPLUG_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CDIPLUG_QEMU_AARCH64})
endif()
