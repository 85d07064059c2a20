# Headers that nearly every file of hmc's larger targets includes: each such target parses them
# once, into a precompiled header, instead of once per file (they are most of a file's compile
# time). -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON turns this off, to check that every file includes
# what it uses.
set(hmc_common_headers
  <algorithm> <atomic> <cstdint> <cstring> <functional> <map> <memory> <optional> <string>
  <utility> <vector>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
  <absl/strings/str_format.h> <absl/strings/string_view.h> <absl/time/clock.h>
  <absl/time/time.h>)

# hmc_precompile_common_headers(TARGET... [TESTS TARGET...]): the tests' targets get GoogleTest's
# headers as well.
function(hmc_precompile_common_headers)
  cmake_parse_arguments(arg "" "" "TESTS" ${ARGN})
  foreach(target IN LISTS arg_UNPARSED_ARGUMENTS)
    target_precompile_headers(${target} PRIVATE ${hmc_common_headers})
  endforeach()
  foreach(target IN LISTS arg_TESTS)
    target_precompile_headers(${target} PRIVATE ${hmc_common_headers} <gmock/gmock.h>
                              <gtest/gtest.h>)
  endforeach()
endfunction()
