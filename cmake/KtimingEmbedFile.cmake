# Script mode (cmake -P): writes OUT, a C header defining `static const char SYM[]` holding IN's bytes plus a
# terminating NUL, so files such as the HTML report's CSS and JS are compiled into the library.
file(READ "${IN}" _hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," _bytes "${_hex}")
string(REPEAT "'\\\\x..'," 24 _row)
string(REGEX REPLACE "(${_row})" "\\1\n" _bytes "${_bytes}")
get_filename_component(_name "${IN}" NAME)
file(WRITE "${OUT}.tmp" "/* generated from ${_name} by cmake/KtimingEmbedFile.cmake: do not edit */\n"
  "static const char ${SYM}[] = {\n${_bytes}'\\0'};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
