#!/bin/bash
# tools/bench/compress.sh - compressed sections of the correlation file
# (Documentation/file-format.rst, format 1.4): bytes per record stored
# plain and with zstd, their ratio, the file's growth per second of
# recording, and the cost of writing and reading, on a real recording.
# Needs no VM: the input is the capture of selftests/data (233 s of a nested
# KVM host and its 2-vCPU guest: 93236 records and probes), or the
# correlation file given.  build/bench/bench_compress does the work.
#
#   tools/bench/compress.sh [FILE.hgc]
#
# One "BENCH compress.<name> <value> <unit>" line each (make bench).
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${BUILD:-build}
input=${1:-$build/unit/data/merge.hgc}

make -s BUILD="$build" "$build/bench/bench_compress" \
	$([ $# -gt 0 ] || echo "$build/unit/data/merge.hgc")
tmp=$(mktemp -d /tmp/hgclock-compress.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$build/bench/bench_compress" "$input" "$tmp"
