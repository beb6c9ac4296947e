# Every third-party dependency of the project, found once here so a missing
# package fails at configure time with its name (scripts/install-deps.sh
# installs them all). Versions are the Debian 12 ones listed in ENVIRONMENT.md.

find_package(Threads REQUIRED)
find_package(OpenSSL 3.0 REQUIRED COMPONENTS Crypto SSL)
find_package(CAF 0.17 REQUIRED)
if(NOT TARGET ucx::ucp) # a second find_package(ucx) in one directory fails
  find_package(ucx CONFIG REQUIRED)
endif()
find_package(Boost 1.74 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(BLAS REQUIRED)
# Tokenizers: Oniguruma runs the pre-tokenizer regexes (the engine Hugging Face
# `tokenizers` uses), utf8proc the Unicode normalizers (libonig-dev,
# libutf8proc-dev).
find_package(PkgConfig REQUIRED)
pkg_check_modules(ONIGURUMA REQUIRED IMPORTED_TARGET oniguruma)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# Image decoding for the vision preprocessor (models/vision/).
find_package(PNG 1.6 REQUIRED)
find_package(JPEG REQUIRED)

find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY xxhash)
if(NOT XXHASH_INCLUDE_DIR OR NOT XXHASH_LIBRARY)
  message(FATAL_ERROR "xxHash not found (Debian package libxxhash-dev)")
endif()
add_library(mstar_xxhash INTERFACE)
add_library(mstar::xxhash ALIAS mstar_xxhash)
target_include_directories(mstar_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(mstar_xxhash INTERFACE ${XXHASH_LIBRARY})

if(MSTAR_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MSTAR_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
