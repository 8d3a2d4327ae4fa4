# Warnings and sanitizers applied to project targets only (never to dependencies).
function(kt_project_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes>
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>)
  if(KTIMING_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${KTIMING_SANITIZE} -fno-omit-frame-pointer
      -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${KTIMING_SANITIZE})
  endif()
endfunction()
