# Warnings and sanitizers applied to project targets only (never to dependencies). -Werror with KTIMING_WERROR
# (ON in CI through scripts/run-tests.sh, OFF by default so a newer compiler's new warning never stops a user).
function(kt_project_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wstrict-prototypes>
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  if(KTIMING_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-Werror>)
  endif()
  if(KTIMING_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${KTIMING_SANITIZE} -fno-omit-frame-pointer
      -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${KTIMING_SANITIZE})
  endif()
endfunction()
