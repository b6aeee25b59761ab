# SPDX-License-Identifier: Apache-2.0
# sandbox/ test programs. sbx-try locks itself down with sbx_lockdown() and
# then does one named thing (tests/sandbox/try-syscall.c); it is test-only
# and never installed, like every target in tests/.
add_executable(sbx-try ${CMAKE_CURRENT_LIST_DIR}/try-syscall.c)
target_compile_options(sbx-try PRIVATE ${CDIPLUG_WARNINGS})
target_link_libraries(sbx-try PRIVATE cdiplug_sbx Threads::Threads)

if(TARGET test_sandbox)
  target_compile_definitions(test_sandbox PRIVATE SBX_TRY="$<TARGET_FILE:sbx-try>")
  add_dependencies(test_sandbox sbx-try)
endif()

# kube-try: the DRA API client (daemon/kube) under the real filter, driven
# by tests/unit/test_kube_sandbox.c against the fake API server.
add_executable(kube-try ${CMAKE_CURRENT_LIST_DIR}/kube-try.c)
target_compile_options(kube-try PRIVATE ${CDIPLUG_WARNINGS})
target_link_libraries(kube-try PRIVATE cdiplug_kube cdiplug_sbx Threads::Threads)
if(TARGET test_kube_sandbox)
  target_compile_definitions(test_kube_sandbox PRIVATE KUBE_TRY="$<TARGET_FILE:kube-try>")
  add_dependencies(test_kube_sandbox kube-try)
endif()
