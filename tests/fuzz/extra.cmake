# SPDX-License-Identifier: Apache-2.0
# libFuzzer harnesses (tests/fuzz/fuzz_*.c). Included from tests/CMakeLists.txt.
#
# In every build, each harness is linked with replay.c into fuzz-replay-<name>
# and its committed corpus (tests/fuzz/corpus/<name>/) runs as the ctest test
# fuzz_<name>_corpus, so every corpus entry is a regression test under gcc
# and the sanitizer builds. With CDIPLUG_FUZZ=ON (clang only; see
# tests/fuzz/run.sh) the harnesses are also linked with libFuzzer as
# fuzz-<name>, for running the fuzzers themselves.
option(CDIPLUG_FUZZ "Also build the libFuzzer harnesses (clang, -fsanitize=fuzzer)" OFF)
if(CDIPLUG_FUZZ AND NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "CDIPLUG_FUZZ needs clang (libFuzzer), not ${CMAKE_C_COMPILER_ID}")
endif()

file(GLOB FUZZ_HARNESSES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.c)
foreach(src IN LISTS FUZZ_HARNESSES)
  get_filename_component(harness ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${harness})
  set(corpus ${CMAKE_CURRENT_LIST_DIR}/corpus/${name})

  add_executable(fuzz-replay-${name} ${CMAKE_CURRENT_LIST_DIR}/replay.c ${src})
  target_compile_options(fuzz-replay-${name} PRIVATE ${CDIPLUG_WARNINGS})
  target_link_libraries(fuzz-replay-${name} PRIVATE cdiplug_core)
  add_test(NAME fuzz_${name}_corpus COMMAND fuzz-replay-${name} ${corpus})
  set_tests_properties(fuzz_${name}_corpus PROPERTIES LABELS "unit;fuzz" TIMEOUT 120)

  if(CDIPLUG_FUZZ)
    add_executable(fuzz-${name} ${src})
    target_compile_options(fuzz-${name} PRIVATE ${CDIPLUG_WARNINGS})
    target_link_libraries(fuzz-${name} PRIVATE cdiplug_core)
    target_link_options(fuzz-${name} PRIVATE -fsanitize=fuzzer)
    set_target_properties(fuzz-${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  endif()
endforeach()
