#!/bin/sh
# paths.sh SOURCE_DIR: every file or folder of the tree that README.md or docs/*.md names in backticks or as a
# link target (a path starting with src/, include/, tools/, tests/, bench/, docs/, scripts/, examples/, cmake/,
# bindings/ or .ci/) exists. A path with a wildcard, a brace list or a placeholder (<api>, NN) names a pattern
# and is checked by its fixed part: the folder before the first such character must exist. Prints each miss with
# the doc and line that names it. A program may be named without its source's extension; what npm installs
# (node_modules) is not part of the tree.
set -eu
src=$1
cd "$src"
fail=0
checked=0
for doc in README.md docs/*.md; do
    # `path` in backticks and ](path) link targets, with their line numbers; a trailing :line, #anchor,
    # punctuation or (args) is not part of the path
    grep -noE '(`|\]\()(\.\./)?(src|include|tools|tests|bench|docs|scripts|examples|cmake|bindings|\.ci)/[^` )]*' "$doc" |
    while IFS= read -r hit; do
        line=${hit%%:*}
        p=${hit#*:}
        p=${p#\`}; p=${p#\](}
        case $doc in docs/*) case $p in ../*) p=${p#../} ;; esac ;; esac
        p=${p%%#*}; p=${p%%:*}
        p=$(printf '%s' "$p" | sed -E 's/[.,;]+$//')
        case $p in
            */node_modules/*|*/node_modules) ;; # made by npm install, not part of the tree
            *[\*\?\[\{\<]*|*NN*|*NAME*|*...*)
                fixed=$(printf '%s' "$p" | sed -E 's/[*?[{<].*$//; s/NN.*$//; s/NAME.*$//; s/\.\.\..*$//')
                fixed=${fixed%/*}
                [ -z "$fixed" ] || [ -e "$fixed" ] || { echo "$doc:$line: names $p, but $fixed does not exist" >&2; echo x; }
                ;;
            *) # a program is named without its source's extension (bench/zone_clock is bench/zone_clock.c)
                [ -e "$p" ] || ls "$p".* >/dev/null 2>&1 || { echo "$doc:$line: names $p, which does not exist" >&2; echo x; }
                ;;
        esac
    done
done > /tmp/kt_doc_paths.$$ 2>&1 || true
misses=$(grep -c '^x$' /tmp/kt_doc_paths.$$ || true)
grep -v '^x$' /tmp/kt_doc_paths.$$ >&2 || true
rm -f /tmp/kt_doc_paths.$$
if [ "$misses" -ne 0 ]; then
    echo "paths: $misses path(s) named in the docs do not exist" >&2
    exit 1
fi
echo "paths: every path named in README.md and docs/*.md exists"
