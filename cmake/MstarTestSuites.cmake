# mstar_discover_test_suites(<target> [TIMEOUT <s>] [PROPERTIES <name> <value>...])
#
# One CTest test per GoogleTest suite of <target> (not one per case, as
# gtest_discover_tests makes): the test is named after the suite
# (`kv_pool_test`, `fixtures/overlap`) and runs
# `<target> --gtest_filter=<suite>.*`, so a failure's output names the case.
# A process a suite instead of a case: under ASan each process start cost
# 0.05-0.18 CPU-s, and the suites of mstar_resources_tests ran in 28 CPU-s
# against 44 for its cases one process each (298 cases in 45 suites).
#
# After each link the binary lists its tests (--gtest_list_tests) and
# cmake/MstarTestSuitesList.cmake writes <target>_suites.cmake; CTest reads
# it through a small include file. Where the binary was not built, CTest
# sees one test, <target>_NOT_BUILT, which fails. Each suite's COST is its
# number of cases, so CTest starts the larger suites first.
# A suite whose cases all skip exits 77 (tests/support/gtest_main.cpp) and
# shows as skipped (SKIP_RETURN_CODE).
function(mstar_discover_test_suites target)
  cmake_parse_arguments(arg "" "TIMEOUT" "PROPERTIES" ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR})
  set(tests_file "${dir}/${target}_suites.cmake")
  set(properties_file "${dir}/${target}_suite_properties.cmake")
  set(properties TIMEOUT ${arg_TIMEOUT} SKIP_RETURN_CODE 77 WORKING_DIRECTORY "${dir}" ${arg_PROPERTIES})
  # Bracket-quoted, one per line: the list script reads them back as written.
  set(text "set(suite_properties\n")
  foreach(item IN LISTS properties)
    string(APPEND text "  [==[${item}]==]\n")
  endforeach()
  string(APPEND text ")\n")
  file(WRITE "${properties_file}" "${text}")
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "binary=$<TARGET_FILE:${target}>" -D "target=${target}"
            -D "tests_file=${tests_file}" -D "properties_file=${properties_file}"
            -P "${PROJECT_SOURCE_DIR}/cmake/MstarTestSuitesList.cmake"
    BYPRODUCTS "${tests_file}"
    VERBATIM)
  set(include_file "${dir}/${target}_include.cmake")
  file(WRITE "${include_file}"
       "if(EXISTS \"${tests_file}\")\n"
       "  include(\"${tests_file}\")\n"
       "else()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
