#!/bin/bash
# User space under AddressSanitizer, LeakSanitizer and UBSan (make asan):
# runs the sanitized unit tests, their TAP names prefixed "asan.", then
# the sanitized tool on correlation files that exercise its file reader
# (a valid one from the unit test's writer, cuts and bit flips of it,
# garbage, a missing file) and on bad command lines.  A sanitizer report
# fails the line even when the exit status looks right.
#
#   tools/asan-check.sh [BUILD_DIR [SAN_BUILD_DIR]]   (make asan first)
set -eu -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-${BUILD:-build}}
san=${2:-$build/asan}
tool="$san/user/hgclock"

# shellcheck source=tools/tap.sh
. tools/tap.sh
TAP_PREFIX=asan.

# Distinct exit statuses for a sanitizer's abort (the tool's own are 0-6).
export ASAN_OPTIONS=exitcode=97:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=exitcode=98:halt_on_error=1:print_stacktrace=1

if [ ! -x "$tool" ] || ! ls "$san"/unit/* >/dev/null 2>&1; then
	tap not-ok build "no sanitized build in $san: run make asan BUILD=$build"
	exit 1
fi

tmp=$(mktemp -d /tmp/hgclock-asan.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
errs="$tmp/stderr"

# The sanitized unit tests run at once, one per CPU, test_cli's two
# halves first (about 8 and 6 minutes under ASan on this project's
# 2-CPU machine; the rest, under one); their outputs in order after.
mapfile -t units < <(unit_programs "$san/unit")
tap_programs "$tmp/unit" "${units[@]}"
failed=0
for t in "$san"/unit/*; do
	[ -f "$tmp/unit/${t##*/}.rc" ] || continue
	out=$(cat "$tmp/unit/${t##*/}.out")
	rc=$(cat "$tmp/unit/${t##*/}.rc")
	sed "s/^\(\(not \)\?ok [0-9]*\) /\1 asan./" <<<"$out"
	if [ $rc -ne 0 ] && [ $rc -ne 4 ] && ! grep -q '^not ok' <<<"$out"; then
		tap not-ok "$(basename "$t")" "exit status $rc without a failed test"
	fi
	grep -q '^not ok' <<<"$out" && failed=1
done

# run EXPECTED_STATUSES ARGS...: the tool exits with one of the statuses
# and no sanitizer spoke; otherwise prints why and returns 1.
run() {
	local want=$1 rc
	shift
	"$tool" "$@" >"$tmp/stdout" <"${stdin:-/dev/null}" 2>"$errs" && rc=0 || rc=$?
	if grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$errs"; then
		echo "# hgclock $*: sanitizer report:"
		grep -E 'runtime error|ERROR|SUMMARY|#[0-9] ' "$errs" | head -n 12 | sed 's/^/#   /'
		return 1
	fi
	case " $want " in
	*" $rc "*) return 0 ;;
	esac
	echo "# hgclock $*: exit status $rc, want one of $want"
	sed 's/^/#   /' "$errs" | head -n 5
	return 1
}

# A valid file: the one test_corr's round_trip writes (as for make fuzz).
seed="$tmp/seed.hgc"
HGCOR_SEED="$seed" "$build/unit/test_corr" -t round_trip >/dev/null 2>&1 ||
	HGCOR_SEED="$seed" "$san/unit/test_corr" -t round_trip >/dev/null 2>&1 || true
if [ ! -s "$seed" ]; then
	tap not-ok tool_dump_valid "test_corr wrote no seed file"
	exit 1
fi
size=$(stat -c %s "$seed")

ok=1
for args in "" "--summary" "--json" "--json --summary"; do
	# shellcheck disable=SC2086
	run 0 dump "$seed" $args || ok=0
done
grep -q 'complete' < <("$tool" dump "$seed" 2>/dev/null) || { echo "# dump: valid file not complete"; ok=0; }
[ $ok = 1 ] && tap ok tool_dump_valid || tap not-ok tool_dump_valid

# Cuts every 32 bytes and at the last byte (every cut and bit flip of
# the reader alone is unit-tested; these go through the whole tool, and
# a sanitized run takes a quarter of a second).
ok=1
for ((n = 0; n < size; n += 32)); do
	head -c "$n" "$seed" >"$tmp/cut.hgc"
	run 6 dump "$tmp/cut.hgc" || ok=0
	[ $((n % 128)) -ne 0 ] || run 6 dump --json --summary "$tmp/cut.hgc" || ok=0
done
head -c $((size - 1)) "$seed" >"$tmp/cut.hgc"
run 6 dump "$tmp/cut.hgc" || ok=0
[ $ok = 1 ] && tap ok tool_dump_truncated || tap not-ok tool_dump_truncated

# One flipped bit every 32 bytes (a different bit each time).
ok=1
for ((n = 0; n < size; n += 32)); do
	python3 -c 'import sys
d = bytearray(open(sys.argv[1], "rb").read()); n = int(sys.argv[2])
d[n] ^= 1 << (n // 32 % 8); open(sys.argv[3], "wb").write(d)' "$seed" "$n" "$tmp/flip.hgc"
	# A flip in reserved or padding bytes can leave the file valid.
	run "0 6" dump "$tmp/flip.hgc" || ok=0
done
[ $ok = 1 ] && tap ok tool_dump_bitflips || tap not-ok tool_dump_bitflips

# Not correlation files: text, a fixed pseudo-random blob, a file holding
# just the magic, an empty file; a missing file exits 1.
ok=1
printf 'root:x:0:0:root:/root:/bin/bash\n' >"$tmp/text"
python3 -c 'import random, sys; random.seed(7); sys.stdout.buffer.write(bytes(random.getrandbits(8) for _ in range(4096)))' >"$tmp/random"
head -c 8 "$seed" >"$tmp/magic"
: >"$tmp/empty"
for f in text random magic empty; do
	run 6 dump "$tmp/$f" || ok=0
	run 6 convert "$tmp/$f" 1 || ok=0
done
run 1 dump "$tmp/missing" || ok=0
[ $ok = 1 ] && tap ok tool_bad_files || tap not-ok tool_bad_files

# convert on a host-only file: the mapping is built, then "no guest 0".
ok=1
run 6 convert "$seed" 1 2 3 || ok=0
run 6 convert "$seed" --recompute --method probe --clock x86-tsc 1 || ok=0
printf '0 1\n1 2\n' >"$tmp/lines"
stdin="$tmp/lines" run 6 convert "$seed" --json || ok=0
[ $ok = 1 ] && tap ok tool_convert || tap not-ok tool_convert

# A paired file from an earlier nested run, when there is one.
pair=$(ls "$build"/nested/*.hgc 2>/dev/null | head -n 1 || true)
if [ -n "$pair" ] && "$build/user/hgclock" dump --summary "$pair" >/dev/null 2>&1; then
	ok=1
	run 0 dump "$pair" || ok=0
	run 0 dump --json "$pair" || ok=0
	run "0 6" convert "$pair" --clock x86-tsc 1000000 || ok=0
	printf '0 1000000\n1 2000000\n' >"$tmp/lines"
	stdin="$tmp/lines" run "0 6" convert "$pair" --recompute || ok=0
	[ $ok = 1 ] && tap ok tool_paired_file || tap not-ok tool_paired_file
else
	tap skip tool_paired_file "no complete $build/nested/*.hgc (the nested tests write one)"
fi

# Command lines: help, version, unknown command and option, bad values.
ok=1
run 0 --help || ok=0
run 0 --version || ok=0
run 2 || ok=0
run 2 no-such-command || ok=0
commands=$("$tool" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
for c in $commands; do
	run 0 "$c" --help || ok=0
	run 2 "$c" --no-such-option || ok=0
done
run 2 record || ok=0
run 2 record -o "$tmp/x" --ring-size 7 || ok=0
run 2 convert "$seed" --vcpu 99999 || ok=0
run 2 convert "$seed" not-a-number || ok=0
run 2 mark --count 0 || ok=0
[ $ok = 1 ] && tap ok tool_command_lines || tap not-ok tool_command_lines

[ "$tap_failed" -eq 0 ] && [ $failed -eq 0 ]
