# SPDX-License-Identifier: Apache-2.0
# protoc-c names a service method's function pointer after the method, so
# Registration.Register becomes a struct member called "register", a C
# keyword. We use grpc core, not protobuf-c's service stubs; rename it.
foreach(f IN ITEMS ${GEN_H} ${GEN_C})
  file(READ ${f} text)
  string(REPLACE "(*register)" "(*register_)" text "${text}")
  string(REPLACE "## register " "## register_ " text "${text}")
  file(WRITE ${f} "${text}")
endforeach()
