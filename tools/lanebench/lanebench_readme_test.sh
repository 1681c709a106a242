#!/bin/bash
# CTest driver: the usage block of README.md agrees with the binary: every flag in
# it is optional ([--flag default], or [--flag a|b|c] with the default first), and
# `lanebench --help` gives that default (--memory has none: it depends on the transport).
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
exit $status
