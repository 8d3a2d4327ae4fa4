# cmake -DIN=file -DOUT=file.c -DSYMBOL=name -P KtimingEmbed.cmake: writes OUT defining `const char SYMBOL[]` with
# IN's text (a C string), so build-time outputs such as nvcc's PTX can be compiled into a target.
file(READ ${IN} _text)
string(REPLACE "\\" "\\\\" _text "${_text}")
string(REPLACE "\"" "\\\"" _text "${_text}")
string(REPLACE "\n" "\\n\"\n\"" _text "${_text}")
get_filename_component(_name ${IN} NAME)
file(WRITE ${OUT}.tmp "/* generated from ${_name} at build time by cmake/KtimingEmbed.cmake; do not edit. */
extern const char ${SYMBOL}[];
const char ${SYMBOL}[] =
\"${_text}\";
")
configure_file(${OUT}.tmp ${OUT} COPYONLY)
