# SPDX-License-Identifier: Apache-2.0
# cdi/ test helpers. Included from tests/CMakeLists.txt after the unit test
# targets exist.

# Rewrites a spec in a loop; test_cdi_crash SIGKILLs it mid-write.
add_executable(cdi-writer ${CMAKE_CURRENT_LIST_DIR}/cdi-writer.c)
target_compile_options(cdi-writer PRIVATE ${CDIPLUG_WARNINGS})
target_link_libraries(cdi-writer PRIVATE cdiplug_cdi)

if(TARGET test_cdi_crash)
  target_compile_definitions(test_cdi_crash PRIVATE CDI_WRITER="$<TARGET_FILE:cdi-writer>")
  add_dependencies(test_cdi_crash cdi-writer)
endif()

# test_cdi_nomem fails allocations inside cdi/ by wrapping malloc and
# strdup at the link; the wrappers are in the test.
if(TARGET test_cdi_nomem)
  target_link_options(test_cdi_nomem PRIVATE -Wl,--wrap=malloc -Wl,--wrap=strdup)
endif()
