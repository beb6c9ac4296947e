# Project-wide compile flags: warnings on and clean, optional sanitizers.
# mstar_target_defaults(<target>) applies them to one of our own targets only,
# so third-party headers keep their own warning level.

set(MSTAR_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                        -Wold-style-cast -Wcast-align -Woverloaded-virtual)
option(MSTAR_WERROR "Treat warnings as errors" ON)

if(MSTAR_SANITIZE)
  set(MSTAR_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
                            -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${MSTAR_SANITIZER_FLAGS}>")
  add_link_options(${MSTAR_SANITIZER_FLAGS})
endif()

function(mstar_target_defaults target)
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${MSTAR_WARNING_FLAGS}>"
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${MSTAR_WERROR}>>:-Werror>")
endfunction()
