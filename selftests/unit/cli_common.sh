# SPDX-License-Identifier: GPL-2.0
#
# What test_cli.sh and test_cli_outputs.sh share: the tool, the recording
# of selftests/data copied into a temporary directory (the current one
# from here on), TAP counters and the run/expect helpers.  Sourced after
# the script has set here (its directory) and top (the source tree).
# A script of its own so that the two halves of the command line's tests
# run at once (tools/check.sh, tools/asan-check.sh: under ASan the whole
# took about 14 minutes on one core).
# shellcheck shell=bash

case $tool in /*) ;; *) tool=$PWD/$tool ;; esac
data=$here/data
[ -f "$data/merge.hgc" ] || data=$top/selftests/data

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n cli.$1"; }
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n cli.$1${2:+ # $2}"
}
skip() { n=$((n + 1)); echo "ok $n cli.$1 # SKIP $2"; }

tmp=$(mktemp -d /tmp/hgclock-cli.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
# Under LeakSanitizer (make asan-check): libtraceevent's global list of
# plugin options, which libtracecmd fills for every handle opened, lost
# 16 bytes once when merge opened its inputs on several threads at once
# (tep_plugin_add_options from tracecmd_ftrace_overrides); not ours.
# And libtracecmd 3.1.6 leaks the clock name it reads from a version 6
# file (extract_trace_clock()'s sscanf %ms, under
# tracecmd_parse_trace_clock(), for each handle opened): also not ours.
# And libtraceevent 1.7.1 loses a few bytes (a strdup()) parsing some of
# a 6.1 or 6.12 kernel's event formats, all of the stack libtraceevent's
# under tep_parse_event(), called by tracecmd_open_head() (many-host.dat;
# the handle itself, allocated outside it, is still checked).
printf 'leak:tep_plugin_add_options\nleak:tracecmd_parse_trace_clock\nleak:tep_parse_event\n' \
	>"$tmp/lsan.supp"
export LSAN_OPTIONS="suppressions=$tmp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# Whole stacks at allocation (libc has no frame pointers: the fast unwinder
# stops in sscanf, above the library functions the suppressions name).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
cd "$tmp" || exit 1
for f in merge.hgc host.dat guest.dat; do
	if [ -f "$data/$f" ]; then
		cp "$data/$f" .
	elif [ -f "$data/$f.xz" ]; then
		xz -dc "$data/$f.xz" >"$f"
	else
		echo "1..0 # SKIP no $f in $data"
		exit 0
	fi
	cp "$f" "pristine.$f"
done
if [ ! -x "$tool" ]; then
	echo "1..0 # SKIP no $tool (make user)"
	exit 0
fi

# run [STDOUT] -- ARGS...: the tool with a time limit (a hang is 124):
# $limit seconds, default 120 (a loaded machine merges slowly);
# $rc and $err (standard error) afterwards.  STDOUT defaults to out.txt.
run() {
	local out=out.txt f
	if [ "$1" != -- ]; then out=$1; shift; fi
	shift
	# Each case starts from intact inputs, whatever the last one did.
	for f in merge.hgc host.dat guest.dat; do
		cmp -s "$f" "pristine.$f" || cp "pristine.$f" "$f"
	done
	timeout "${limit:-120}" "$tool" "$@" >"$out" 2>err.txt
	rc=$?
	err=$(cat err.txt)
}

# expect NAME RC [PATTERN]: the last run exited RC and said PATTERN
# (grep -E) on standard error.
expect() {
	local name=$1 want=$2 pat=${3:-}
	if [ "$rc" != "$want" ]; then
		not_ok "$name" "exit $rc, want $want: ${err//$'\n'/ | }"
	elif [ -n "$pat" ] && ! grep -Eq -- "$pat" <<<"$err"; then
		not_ok "$name" "stderr lacks /$pat/: ${err//$'\n'/ | }"
	else
		ok "$name"
	fi
}

# unchanged NAME FILE: FILE is still its pristine copy.
unchanged() {
	if cmp -s "$2" "pristine.$2"; then ok "$1"; else not_ok "$1" "$2 was changed"; fi
}

no_temp_left() {
	local left
	left=$(ls -A | grep -F '.tmp-' || true)
	if [ -z "$left" ]; then ok "$1"; else not_ok "$1" "temporary files left: $left"; fi
}

merge_in=(merge merge.hgc host.dat guest.dat -q)

# mkapp FILE CLOCK NODENAME TAIL: two records on CPU 0 (Documentation/library.rst's
# format), then TAIL bytes of a third one.
mkapp() {
	python3 - "$@" <<'PY'
import struct, sys
path, clock, node, tail = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), int(sys.argv[4])
hdr = b"HGCLKEVT" + struct.pack("<IIIIII", 1, 128, clock, 0, 4242, 0)
hdr += b"cliapp".ljust(16, b"\0") + node.ljust(72, b"\0") + bytes(8)
def rec(kind, ts, name, text):
    size = (24 + len(name) + len(text) + 7) & ~7
    body = struct.pack("<HBBIQIHH", size, kind, 1, 0, ts, 77, len(name), len(text)) + name + text
    return body.ljust(size, b"\0")
recs = rec(2, 1000, b"req", b"one") + rec(3, 2000, b"req", b"one done")
with open(path, "wb") as f:
    f.write(hdr + recs + rec(1, 3000, b"tick", b"")[:tail])
PY
}
