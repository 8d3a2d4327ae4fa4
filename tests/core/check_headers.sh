#!/bin/sh
# check_headers.sh — every installed header (every *.h under include/) compiles on its own, warning-free under
# -Wall -Wextra -Werror -pedantic, as C11 and as C++11, with timing enabled (KTIMING_ENABLE=1) and compiled out
# (KTIMING_ENABLE=0). Compiled out, each references nothing of the library, and the analysis headers must refuse
# to compile (clock_model.h's functions stay real: it compiles). <ktiming/mpi.h> needs MPI's headers:
# checked when MPI_INCLUDES (':'-separated) is given, else said as skipped.
# Usage: check_headers.sh CC CXX INCLUDE_DIR [MPI_INCLUDES]
set -u
cc=$1 cxx=$2 inc=$3 mpi=${4:-}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
mpi_flags=
if [ -n "$mpi" ]; then
  old_ifs=$IFS; IFS=:
  for d in $mpi; do mpi_flags="$mpi_flags -isystem $d"; done # as a build using MPI::MPI_C sees them
  IFS=$old_ifs
fi
# compile LANG(c|c++) ENABLE HEADER: 0 when it compiled (object in $tmp/t.o, diagnostics in $tmp/err)
compile() {
  extra=
  [ "$3" = ktiming/mpi.h ] && extra=$mpi_flags
  if [ "$1" = c ]; then
    printf '#include <%s>\nint main(void) { return 0; }\n' "$3" >"$tmp/t.c"
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -Wextra -Werror -pedantic -DKTIMING_ENABLE="$2" -I"$inc" $extra -c "$tmp/t.c" \
      -o "$tmp/t.o" 2>"$tmp/err"
  else
    printf '#include <%s>\nint main() { return 0; }\n' "$3" >"$tmp/t.cpp"
    # shellcheck disable=SC2086
    "$cxx" -std=c++11 -Wall -Wextra -Werror -pedantic -DKTIMING_ENABLE="$2" -I"$inc" $extra -c "$tmp/t.cpp" \
      -o "$tmp/t.o" 2>"$tmp/err"
  fi
}
headers=$(cd "$inc" && find . -name '*.h' | sed 's|^\./||' | sort)
[ -n "$headers" ] || { echo "FAIL: no headers under $inc"; exit 1; }
for h in $headers; do
  if [ "$h" = ktiming/mpi.h ] && [ -z "$mpi" ]; then
    echo "skipped: <$h> (no MPI headers given)"; continue
  fi
  for lang in c c++; do
    if ! compile $lang 1 "$h"; then
      echo "FAIL: <$h> as $lang with KTIMING_ENABLE=1:"; cat "$tmp/err"; fail=1
    fi
    n=$((n + 1))
    case $h in
    ktiming/analysis.h | ktiming/compare.h)
      if compile $lang 0 "$h"; then
        echo "FAIL: <$h> as $lang compiled with KTIMING_ENABLE=0 (it must refuse: it needs the analysis library)"
        fail=1
      fi
      continue ;;
    esac
    if ! compile $lang 0 "$h"; then
      echo "FAIL: <$h> as $lang with KTIMING_ENABLE=0:"; cat "$tmp/err"; fail=1; continue
    fi
    und=$(nm -u "$tmp/t.o" | grep -E ' kt_' || true)
    if [ -n "$und" ]; then echo "FAIL: <$h> as $lang compiled out still references the library: $und"; fail=1; fi
  done
done
[ $fail = 0 ] && echo "headers: $n header/language pairs compile warning-free enabled and compiled out"
exit $fail
