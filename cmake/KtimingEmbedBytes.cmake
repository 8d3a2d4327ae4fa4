# kt_embed(<target> <symbol> <input>): compiles <input>'s bytes into <target> as `static const char <symbol>[]`
# (any bytes, NUL-terminated), in a generated header <symbol>.h found on the target's include path, regenerated
# when the input changes. The per-file work is cmake/KtimingEmbedFile.cmake.
# May be called from another directory than the one defining <target>: a custom target carries the rule.
function(kt_embed target symbol input)
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/kt_embed)
  set(_out ${_dir}/${symbol}.h)
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
    COMMAND ${CMAKE_COMMAND} -DIN=${input} -DOUT=${_out} -DSYM=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/KtimingEmbedFile.cmake
    DEPENDS ${input} ${PROJECT_SOURCE_DIR}/cmake/KtimingEmbedFile.cmake
    COMMENT "Embedding ${input}" VERBATIM)
  add_custom_target(${target}_${symbol} DEPENDS ${_out})
  add_dependencies(${target} ${target}_${symbol})
  target_include_directories(${target} PRIVATE ${_dir})
endfunction()
