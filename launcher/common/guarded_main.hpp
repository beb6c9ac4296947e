#pragma once

// Every binary's main runs inside guarded_main: an exception that escapes the
// program's own error handling (an allocation that fails, a library that
// throws) ends the process with one clear line on stderr and exit status 2,
// never with std::terminate's abort. The same holds for an exception escaping
// any other thread, through the terminate handler.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include "core/untrusted_json.hpp"

namespace mstar::launcher {

namespace internal {

inline const char*& guarded_program() {
  static const char* name = "mstar";
  return name;
}

// One line for the exception in flight (`current` may be null).
inline void report_exception(const std::exception_ptr& current) {
  const char* program = guarded_program();
  try {
    if (current)
      std::rethrow_exception(current);
    std::fprintf(stderr, "%s: fatal: terminated without an exception\n", program);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory (an allocation failed)\n", program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", program,
                 text_excerpt(e.what(), 300).c_str());
  } catch (...) {
    std::fprintf(stderr, "%s: unexpected error (not a std::exception)\n", program);
  }
  std::fflush(stderr);
}

[[noreturn]] inline void on_terminate() {
  const auto current = std::current_exception();
  report_exception(current);
  if (!current)
    std::abort();  // not an exception: a bug worth a core dump
  std::_Exit(2);
}

}  // namespace internal

/// Runs `body()` (the program's main) and returns its status; an exception
/// that escapes it becomes "<program>: <what>" on stderr and status 2.
template <class Body>
int guarded_main(const char* program, Body&& body) noexcept {
  internal::guarded_program() = program;
  std::set_terminate(internal::on_terminate);
  try {
    return body();
  } catch (...) {
    internal::report_exception(std::current_exception());
    return 2;
  }
}

}  // namespace mstar::launcher
