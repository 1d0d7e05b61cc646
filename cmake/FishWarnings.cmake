# Warnings on and clean for every fish target: call fish_warnings(<target>).
# -Wshadow=local is GCC's; clang has no such level (its -Wshadow is far wider).
function(fish_warnings target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
      $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wshadow=local> $<$<COMPILE_LANG_AND_ID:C,GNU>:-Wshadow=local>
      $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
  endif()
endfunction()
