# Instruction-set variants are chosen at run time (cpuid), so only the files that
# hold a variant are compiled for it, by name:
#   *_avx2.cpp    AVX2 + FMA + F16C            (x86-64-v3)
#   *_avxvnni.cpp that + AVX-VNNI              (Alder Lake and later client cores)
#   *_avx512.cpp  AVX-512 F/BW/VL/DQ + VNNI    (Ice Lake, Zen 4 and later)
# Everything else stays baseline x86-64 so the binaries run on any x86-64 CPU.
function(fish_simd_sources)
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    return()
  endif()
  foreach(f ${ARGN})
    if(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
    elseif(f MATCHES "_avxvnni\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2;-mavxvnni")
    elseif(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mbmi2;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
    endif()
  endforeach()
endfunction()
