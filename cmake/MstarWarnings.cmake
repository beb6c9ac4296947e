# Project-wide compile flags: warnings on and clean, optional sanitizers.
# mstar_target_defaults(<target>) applies them to one of our own targets only,
# so third-party headers keep their own warning level.

set(MSTAR_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                        -Wold-style-cast -Wcast-align -Woverloaded-virtual)
option(MSTAR_WERROR "Treat warnings as errors" ON)

# MSTAR_SANITIZE: OFF, ON (= address,undefined, what the boolean option meant
# before), or a comma-separated list of address, undefined, thread. ThreadSanitizer
# cannot be combined with AddressSanitizer. The flags reach C++ sources only, not
# nvcc's; the sanitized trees in scripts/run-tests.sh are CPU only.
set(MSTAR_SANITIZERS "")
string(TOUPPER "${MSTAR_SANITIZE}" _mstar_sanitize)
if(_mstar_sanitize MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(MSTAR_SANITIZERS address undefined)
elseif(NOT _mstar_sanitize MATCHES "^(OFF|NO|FALSE|N|0|)$")
  string(REPLACE "," ";" MSTAR_SANITIZERS "${MSTAR_SANITIZE}")
  foreach(_mstar_sanitizer IN LISTS MSTAR_SANITIZERS)
    if(NOT _mstar_sanitizer MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "MSTAR_SANITIZE must be OFF, ON or a comma-separated list of address, "
                          "undefined, thread; got '${MSTAR_SANITIZE}'")
    endif()
  endforeach()
  if("thread" IN_LIST MSTAR_SANITIZERS AND "address" IN_LIST MSTAR_SANITIZERS)
    message(FATAL_ERROR "MSTAR_SANITIZE: thread and address cannot be combined")
  endif()
endif()

if(MSTAR_SANITIZERS)
  list(JOIN MSTAR_SANITIZERS "," _mstar_sanitizer_list)
  set(MSTAR_SANITIZER_FLAGS -fsanitize=${_mstar_sanitizer_list} -fno-sanitize-recover=all
                            -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${MSTAR_SANITIZER_FLAGS}>")
  add_link_options(${MSTAR_SANITIZER_FLAGS})
  # GCC warns (-Wtsan) at every std::atomic_thread_fence under TSan; Asio's
  # scheduler (the HTTP server) has one. Its handoffs also go through
  # mutexes, which TSan does see.
  if("thread" IN_LIST MSTAR_SANITIZERS AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-tsan>")
  endif()
endif()

function(mstar_target_defaults target)
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${MSTAR_WARNING_FLAGS}>"
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${MSTAR_WERROR}>>:-Werror>")
endfunction()

# mstar_hot_sources(<file>...): the CPU kernels' inner loops. A Debug tree
# with sanitizers (CI's ASan + UBSan tree) compiles them at -O1, as ASan's
# documentation advises for speed: at -O0 the model tests spend most of their
# time in these loops. Sanitizer checks stay on; only the optimisation level
# changes, and only for these files.
function(mstar_hot_sources)
  if(MSTAR_SANITIZERS AND CMAKE_BUILD_TYPE STREQUAL "Debug")
    set_source_files_properties(${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                                PROPERTIES COMPILE_OPTIONS -O1)
  endif()
endfunction()
