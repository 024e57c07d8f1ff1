# longhaul_target_defaults(target): warnings (as errors in CI) and sanitizers for our own code.
function(longhaul_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
  if(LONGHAUL_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

if(LONGHAUL_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${LONGHAUL_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=${LONGHAUL_SANITIZE})
endif()

# longhaul_add_library(name SOURCES...): a component library with public headers in include/.
function(longhaul_add_library name)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  longhaul_target_defaults(${name})
endfunction()

# longhaul_add_binary(name SOURCES...): a thin main that parses flags and calls a library.
function(longhaul_add_binary name)
  add_executable(${name} ${ARGN})
  longhaul_target_defaults(${name})
endfunction()
