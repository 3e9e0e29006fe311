#!/bin/bash
# make fuzz: runs the correlation file reader under libFuzzer (with ASan
# and UBSan) for a bounded time, from a seed corpus of valid files made by
# the unit test's writer.  Prints one TAP line.
#
#   tools/fuzz.sh BUILD_DIR SECONDS
set -u
build=$1 secs=$2
corpus=$build/fuzz/corpus
mkdir -p "$corpus"
# Seed: a real file written by the library (the unit test's writer).
if [ ! -s "$corpus/seed" ]; then
	HGCOR_SEED="$corpus/seed" "$build/unit/test_corr" -t round_trip >/dev/null 2>&1 ||
		HGCOR_SEED="$corpus/seed" "$build/unit/test_corr" >/dev/null 2>&1
fi
log=$build/fuzz/fuzz.log
if "$build/fuzz/fuzz_corr" -max_total_time="$secs" -timeout=5 -rss_limit_mb=1024 \
	-print_final_stats=1 "$corpus" >"$log" 2>&1; then
	runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
	echo "ok 1 fuzz.corr_reader # ${runs:-?} inputs in ${secs} s, no crash"
else
	echo "not ok 1 fuzz.corr_reader # crash or leak, see $log"
	grep -E 'ERROR|SUMMARY' "$log" | head -5 | sed 's/^/# /'
	exit 1
fi
