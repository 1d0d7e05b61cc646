# -DFISH_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer for everything
# (CI builds the GGUF corruption corpus test this way).
if(FISH_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# -DFISH_FUZZ=ON (clang only): the libFuzzer target tests/fuzz/fuzz_gguf. Every
# target is compiled with libFuzzer's coverage instrumentation
# (-fsanitize=fuzzer-no-link) and ASan + UBSan, and linked with ASan + UBSan;
# fuzz_gguf alone links libFuzzer's main (-fsanitize=fuzzer, tests/fuzz). Build
# only the fuzz and test targets in such a build: the plugins link with
# -z defs, which clang's static sanitizer runtime in the executable cannot satisfy.
if(FISH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FISH_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-14 "
                        "-DCMAKE_C_COMPILER=clang-14 (cmake/install-deps.sh --tests installs them)")
  endif()
  if(NOT FISH_SANITIZE)
    add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    add_link_options(-fsanitize=address,undefined)
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link -gline-tables-only)  # file:line in reports
endif()
