# SPDX-License-Identifier: Apache-2.0
# The fake Kubernetes API server (fakeapi*.c) speaks TLS with OpenSSL, which
# nothing else in the tree needs: its own library, linked by the kube tests.
pkg_check_modules(OPENSSL REQUIRED IMPORTED_TARGET openssl)
add_library(test_fakeapi STATIC ${CMAKE_CURRENT_LIST_DIR}/fakeapi.c
            ${CMAKE_CURRENT_LIST_DIR}/fakeapi_http.c ${CMAKE_CURRENT_LIST_DIR}/fakeapi_rules.c
            ${CMAKE_CURRENT_LIST_DIR}/fakeapi_tls.c ${CMAKE_CURRENT_LIST_DIR}/fakeapi_hooks.c
            ${CMAKE_CURRENT_LIST_DIR}/fakeapi_fields.c ${CMAKE_CURRENT_LIST_DIR}/fakeapi_slices.c
            ${CMAKE_CURRENT_LIST_DIR}/fakeapi_nodes.c)
target_compile_options(test_fakeapi PRIVATE ${CDIPLUG_WARNINGS})
target_include_directories(test_fakeapi PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_fakeapi PUBLIC PkgConfig::OPENSSL PkgConfig::CJSON Threads::Threads)

foreach(t IN LISTS UNIT_TESTS)
  get_filename_component(name ${t} NAME_WE)
  if(name MATCHES "^test_kube")
    target_link_libraries(${name} PRIVATE test_fakeapi PkgConfig::CURL)
    if(TARGET cdiplug_kube)
      target_link_libraries(${name} PRIVATE cdiplug_kube)
    endif()
  endif()
endforeach()
