# cmake -D binary=... -D target=... -D tests_file=... -D properties_file=...
#       -P MstarTestSuitesList.cmake
# Run after each link of a test binary (cmake/MstarTestSuites.cmake): lists
# its GoogleTest suites and writes one add_test per suite into tests_file.
# The listing fails the build if the binary cannot list its tests.
include("${properties_file}")
execute_process(COMMAND "${binary}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  file(REMOVE "${tests_file}")
  message(FATAL_ERROR "${target}: `${binary} --gtest_list_tests` failed (${rc}):\n${errors}${listing}")
endif()
# The listing: a suite's line ("kv_pool_test." or "fixtures/overlap.  # TypeParam = ...")
# at the start of the line, then its cases indented by two spaces.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites 0)  # suites given a test
set(text "# Written by cmake/MstarTestSuitesList.cmake from ${target} --gtest_list_tests.\n")
set(suite "")
set(cases 0)
# A DISABLED_ suite, or one whose cases are all DISABLED_ (the bodies of
# child processes, tests/support/self_child.hpp), gets no test.
macro(flush_suite)
  if(NOT suite STREQUAL "" AND cases GREATER 0 AND NOT suite MATCHES "(^|/)DISABLED_")
    math(EXPR suites "${suites} + 1")
    string(APPEND text "add_test([==[${suite}]==] [==[${binary}]==] [==[--gtest_filter=${suite}.*]==])\n"
                       "set_tests_properties([==[${suite}]==] PROPERTIES COST ${cases}")
    foreach(item IN LISTS suite_properties)
      string(APPEND text " [==[${item}]==]")
    endforeach()
    string(APPEND text ")\n")
  endif()
endmacro()
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    set(next "${CMAKE_MATCH_1}")  # before flush_suite's own MATCHES resets it
    flush_suite()
    set(suite "${next}")
    set(cases 0)
  elseif(line MATCHES "^  [^ ]" AND NOT line MATCHES "^  DISABLED_")
    math(EXPR cases "${cases} + 1")
  endif()
endforeach()
flush_suite()
if(suites EQUAL 0)
  message(FATAL_ERROR "${target}: `${binary} --gtest_list_tests` listed no suite:\n${listing}")
endif()
file(WRITE "${tests_file}" "${text}")
