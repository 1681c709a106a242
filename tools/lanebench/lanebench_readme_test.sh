#!/bin/bash
# CTest driver: the usage block of README.md agrees with the binary: every flag in
# it is optional ([--flag default], or [--flag a|b|c] with the default first), and
# `lanebench --help` gives that default (--memory has none: it depends on the transport);
# and every flag of --help is in it, but for the shapes' own flags, named under Shapes.
# Usage: lanebench_readme_test.sh <lanebench binary> <README.md>
set -u
bin=$1 readme=$2
status=0
usage=$(sed -n '/^    lanebench /,/^$/p' "$readme")
help=$("$bin" --help)
if [ -z "$usage" ]; then
  echo "no usage block ('    lanebench ...') in $readme"
  exit 1
fi
# A flag outside brackets reads as required.
bare=$(echo "$usage" | sed 's/\[[^]]*\]//g' | grep -o -- '--[a-z-]*')
if [ -n "$bare" ]; then
  echo "shown as required in the README, but every flag is optional:" $bare
  status=1
fi
while read -r flag value; do
  [ "$flag" = --memory ] && continue
  default=${value%%|*}
  if ! echo "$help" | grep -qE -- "^ +$flag [A-Z:]+=$default( |\$)"; then
    echo "README: $flag $default; --help: $(echo "$help" | grep -E -- "^ +$flag " || echo none)"
    status=1
  fi
done < <(echo "$usage" | grep -o '\[--[^]]*\]' | tr -d '[]')
# Every flag --help prints is in the usage block, or (a shape's own flag) named under
# Shapes: a usage block that lost its flags, or a flag the README never names, fails.
# --help and --version print and exit: the README names them in its text.
flags=$(echo "$help" | grep -oE -- '^ +(-[a-z],)?--[a-z-]+' | grep -o -- '--[a-z-]*' |
  grep -vx -e --help -e --version)
listed=$(echo "$usage" | grep -o '\[--[a-z-]*' | tr -d '[')
shapes=$(sed -n '/^## Shapes/,/^## /p' "$readme")
if [ -z "$flags" ]; then
  echo "no flags found in lanebench --help"
  status=1
fi
for flag in $flags; do
  if ! echo "$listed" | grep -qx -- "$flag" && ! echo "$shapes" | grep -qE -- "\`$flag[\` ]"; then
    echo "--help prints $flag; the README has it neither in the usage block nor under Shapes"
    status=1
  fi
done
exit $status
