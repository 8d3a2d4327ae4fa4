# GLSL compute shaders -> SPIR-V C headers at build time with glslangValidator (glslang-tools).
include_guard(GLOBAL)
find_program(KTIMING_GLSLANG glslangValidator)

# kt_add_spirv(<target> <shader.comp>...): compiles each shader into <name>_spv.h (a `const uint32_t
# <name>_spv[]` array) in a per-target build directory that is added to the target's include path.
function(kt_add_spirv target)
  if(NOT KTIMING_GLSLANG)
    message(FATAL_ERROR "kt_add_spirv: glslangValidator not found (install glslang-tools)")
  endif()
  set(outdir ${CMAKE_CURRENT_BINARY_DIR}/${target}_spirv)
  set(outs "")
  foreach(src ${ARGN})
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(name ${src} NAME_WE)
    set(out ${outdir}/${name}_spv.h)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${outdir}
      COMMAND ${KTIMING_GLSLANG} -V --target-env vulkan1.0 --quiet --vn ${name}_spv -o ${out} ${abs}
      DEPENDS ${abs}
      COMMENT "SPIR-V ${name}.comp"
      VERBATIM)
    list(APPEND outs ${out})
  endforeach()
  target_sources(${target} PRIVATE ${outs})
  target_include_directories(${target} PRIVATE ${outdir})
endfunction()
