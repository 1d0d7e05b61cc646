# fish_engine_area(<area> DEPS <targets>...): the static library fish_<area> from
# engine/src/<area>/*.cpp (instruction-set variants by file name, see
# FishSimd.cmake). An area with no sources yet is an INTERFACE library.
function(fish_engine_area area)
  cmake_parse_arguments(A "" "" "DEPS" ${ARGN})
  file(GLOB _src CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(_src)
    fish_simd_sources(${_src})
    add_library(fish_${area} STATIC ${_src})
    target_include_directories(fish_${area} PUBLIC ${PROJECT_SOURCE_DIR}/engine/src ${PROJECT_SOURCE_DIR}/engine/include)
    target_link_libraries(fish_${area} PUBLIC ${A_DEPS})
    fish_warnings(fish_${area})
  else()
    add_library(fish_${area} INTERFACE)
    target_include_directories(fish_${area} INTERFACE ${PROJECT_SOURCE_DIR}/engine/src ${PROJECT_SOURCE_DIR}/engine/include)
    target_link_libraries(fish_${area} INTERFACE ${A_DEPS})
  endif()
endfunction()
