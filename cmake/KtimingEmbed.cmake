# The one way ktiming compiles a file into C. include() it for kt_embed(); the same file run with cmake -P does the
# per-file work at build time.
#
# kt_embed(<target> <symbol> <input>): generates <symbol>.h, defining `static const char <symbol>[]` with
# <input>'s bytes plus a terminating NUL (so `sizeof <symbol> - 1` is the file's length and text inputs are
# C strings), on <target>'s include path; regenerated when <input> changes. <input> may be a build output (the
# PTX nvcc writes). May be called from another directory than the one defining <target>.
if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode: cmake -DIN=<input> -DOUT=<header> -DSYM=<symbol> -P KtimingEmbed.cmake
  file(READ "${IN}" _hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," _bytes "${_hex}")
  string(REPEAT "'\\\\x..'," 24 _row)
  string(REGEX REPLACE "(${_row})" "\\1\n" _bytes "${_bytes}")
  get_filename_component(_name "${IN}" NAME)
  file(WRITE "${OUT}.tmp" "/* generated from ${_name} by cmake/KtimingEmbed.cmake: do not edit */\n"
    "static const char ${SYM}[] = {\n${_bytes}'\\0'};\n")
  file(RENAME "${OUT}.tmp" "${OUT}")
  return()
endif()

function(kt_embed target symbol input)
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/kt_embed)
  set(_out ${_dir}/${symbol}.h)
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
    COMMAND ${CMAKE_COMMAND} -DIN=${input} -DOUT=${_out} -DSYM=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/KtimingEmbed.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/KtimingEmbed.cmake
    COMMENT "Embedding ${input}" VERBATIM)
  add_custom_target(${target}_${symbol} DEPENDS ${_out})
  add_dependencies(${target} ${target}_${symbol})
  target_include_directories(${target} PRIVATE ${_dir})
endfunction()
