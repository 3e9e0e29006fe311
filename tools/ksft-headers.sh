#!/bin/bash
# Extracts the kselftest harness (kselftest_harness.h, kselftest.h) from
# Debian's linux-source-* tarball into DIR.  Nothing of it is kept in the
# repository.
set -euo pipefail
dir=${1:?usage: ksft-headers.sh DIR}
tarball=$(ls /usr/src/linux-source-*.tar.* 2>/dev/null | sort -V | tail -n 1)
if [ -z "$tarball" ]; then
	echo "ksft-headers: no /usr/src/linux-source-*.tar.*: run tools/deps.sh (package linux-source-6.1)" >&2
	exit 1
fi
top=$(basename "$tarball" | sed 's/\.tar\..*$//')
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xf "$tarball" -C "$tmp" \
	"$top/tools/testing/selftests/kselftest_harness.h" \
	"$top/tools/testing/selftests/kselftest.h"
cp "$tmp/$top/tools/testing/selftests/kselftest_harness.h" \
   "$tmp/$top/tools/testing/selftests/kselftest.h" "$dir/"
echo "ksft-headers: harness from $tarball" >&2
