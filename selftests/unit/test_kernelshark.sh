#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# merge --dat opened by KernelShark 2.2 (Debian's kernelshark, libkshark).
#
# 1. Its library, as kernelshark -i HOST -a GUEST loads the files
#    (build/unit/bin/ks_times): every host and guest event at exactly the time
#    hgclock merge gives it, i.e. host and guest on one time base; the
#    recording's own trace.dat files (trace-cmd's TimeShift estimate) are
#    loaded with other guest times, which shows that the check can fail.
# 2. The program itself under Xvfb, with the KVM combo plugin, driven by a
#    session file: it loads both files, keeps the host/guest combo plots,
#    and its window is captured to a PNG (build/unit/kernelshark/), which
#    HGCLOCK_DOC_IMAGES=1 also copies to Documentation/images/.
#
#   test_kernelshark.sh [HGCLOCK-TOOL]
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=${HGCLOCK_TOP:-@TOP@}
case $top in @*) top=$(cd "$here/../.." && pwd) ;; esac
tool=${1:-$here/../user/hgclock}
case $tool in /*) ;; *) tool=$PWD/$tool ;; esac
data=$here/data
ks_times=$here/bin/ks_times
shots=$here/kernelshark

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n kernelshark.$1"; }
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n kernelshark.$1${2:+ # $2}"
}
skip() { n=$((n + 1)); echo "ok $n kernelshark.$1 # SKIP $2"; }

tmp=$(mktemp -d /tmp/hgclock-ks.XXXXXX) || exit 1
xvfb_pid=
ks_pid=
cleanup() {
	[ -n "$ks_pid" ] && kill "$ks_pid" 2>/dev/null
	[ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp"
cd "$tmp" || exit 1
for f in merge.hgc host.dat guest.dat; do
	if [ ! -f "$data/$f" ]; then
		echo "1..0 # SKIP no $f in $data (make unit unpacks it)"
		exit 0
	fi
	cp "$data/$f" .
done
chmod 644 ./*

if ! "$tool" merge merge.hgc host.dat guest.dat -q -o merged.txt --dat out.dat 2>merge.err; then
	not_ok dat_written "$(head -c 300 merge.err)"
	echo "1..$n"
	exit 1
fi

# "machine cpu ns event" of the merge's lines (guest: its vCPU).
awk '{ m = $1 == "host" ? 0 : 1
       for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
	       t = substr($i, 1, length($i) - 1); sub(/\./, "", t); sub(/^0+/, "", t)
	       c = $(i - 1); gsub(/[][]/, "", c)
	       print m, c + 0, t, $(i + 1); break } }' merged.txt | sort >want.txt

# ks_rows FILE...: the same from KernelShark's library ("system/" dropped).
ks_rows() {
	"$ks_times" "$@" | awk '$1 != "MAP" { e = $4; sub(/^[^\/]*\//, "", e); print $1, $2, $3, e }' |
		sort
}

if [ ! -x "$ks_times" ]; then
	for t in lib_loads_files lib_host_times_exact lib_guest_times_exact lib_timeshift_input_differs \
		lib_kvm_combo_map; do
		skip "$t" "no build/unit/bin/ks_times (libkshark-dev not installed: tools/deps.sh)"
	done
else
	if ks_rows out.dat out-g0.dat >got.txt 2>ks.err && [ -s got.txt ]; then
		ok lib_loads_files
	else
		not_ok lib_loads_files "$(head -c 300 ks.err)"
	fi
	for m in 0 1; do
		name=$([ $m = 0 ] && echo host || echo guest)
		w=$(awk -v m=$m '$1 == m' want.txt | sort)
		g=$(awk -v m=$m '$1 == m' got.txt | sort)
		if [ -n "$w" ] && [ "$w" = "$g" ]; then
			ok "lib_${name}_times_exact"
		else
			not_ok "lib_${name}_times_exact" "$(diff <(echo "$w") <(echo "$g") | grep -c '^[<>]') rows differ, first: $(diff <(echo "$w") <(echo "$g") | grep -m2 '^[<>]' | tr '\n' ' ')"
		fi
	done
	# The map KernelShark's KVM combo plots are drawn from: guest stream 1,
	# host stream 0, each vCPU on the host thread merge names for it.
	want_map=$(sed -n 's/^g0 v\([0-9]*\) .*{tid \([0-9]*\),.*/MAP 0 1 \1 \2/p' merged.txt | sort -u)
	got_map=$("$ks_times" out.dat out-g0.dat | awk '$1 == "MAP" { print $1, $3, $4, $5, $6 }' | sort)
	if [ -n "$want_map" ] && [ "$want_map" = "$got_map" ]; then
		ok lib_kvm_combo_map
	else
		not_ok lib_kvm_combo_map "want: $(echo $want_map), KernelShark: $(echo $got_map)"
	fi
	# The recording's own files: KernelShark shifts the guest by trace-cmd's
	# TimeShift, an estimate; its guest times are not the merge's.
	w=$(awk '$1 == 1' want.txt)
	g=$(ks_rows host.dat guest.dat 2>/dev/null | awk '$1 == 1')
	differ=$(diff <(echo "$w") <(echo "$g") | grep -c '^>')
	if [ -n "$g" ] && [ "$differ" -gt 0 ]; then
		ok lib_timeshift_input_differs
	else
		not_ok lib_timeshift_input_differs "the recording's guest.dat loads with the merge's times"
	fi
fi

# ---- the program, under Xvfb --------------------------------------------------
gui_tests="gui_loads_both gui_combo_plots gui_screenshot"
missing=
for p in kernelshark Xvfb xdotool import; do
	command -v "$p" >/dev/null || missing="$missing $p"
done
if [ -n "$missing" ]; then
	for t in $gui_tests; do skip "$t" "not installed:$missing (tools/deps.sh)"; done
	echo "1..$n"
	[ "$failed" -eq 0 ]
	exit
fi
mkdir -m 777 home
# KernelShark asks root to confirm in a dialog: run it as nobody.
as_user=()
[ "$(id -u)" -eq 0 ] && as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
# start_xvfb: the X server the program draws on, $DISPLAY set.
start_xvfb() {
	rm -f display.txt
	Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp 3>display.txt 2>>xvfb.log &
	xvfb_pid=$!
	for _ in $(seq 50); do [ -s display.txt ] && break; sleep 0.2; done
	export DISPLAY=:$(cat display.txt 2>/dev/null)
}
# xvfb_alive: Xvfb still runs; else it is started again, said on stdout
# (a CI run of 2026-12-06 lost it between the two sessions: the second
# KernelShark found no display, "Available platform plugins are: ...").
xvfb_alive() {
	kill -0 "$xvfb_pid" 2>/dev/null && return 0
	echo "# Xvfb had exited ($(tail -n 1 xvfb.log 2>/dev/null)); started again"
	start_xvfb
}
start_xvfb

# ks_run ARGS...: KernelShark until its window has drawn; then the window.
ks_run() {
	local w=
	"${as_user[@]}" env HOME="$tmp/home" XDG_RUNTIME_DIR="$tmp/home" DISPLAY="$DISPLAY" \
		kernelshark "$@" >>ks.log 2>&1 &
	ks_pid=$!
	for _ in $(seq 120); do
		w=$(xdotool search --name '^Kernel Shark' 2>/dev/null | head -n 1)
		[ -n "$w" ] && break
		kill -0 "$ks_pid" 2>/dev/null || break
		sleep 0.5
	done
	[ -n "$w" ] || return 1
	sleep 8		# loading, plugins, first paint
	echo "$w"
}

# ks_quit WINDOW: Ctrl+Q, which saves its last session, and wait.
ks_quit() {
	xdotool windowfocus "$1" 2>/dev/null
	xdotool key ctrl+q 2>/dev/null
	for _ in $(seq 40); do kill -0 "$ks_pid" 2>/dev/null || break; sleep 0.25; done
	kill "$ks_pid" 2>/dev/null
	wait "$ks_pid" 2>/dev/null
	ks_pid=
}

session=home/.cache/kernelshark/lastsession.json
if ! w=$(ks_run -i out.dat -a out-g0.dat -p kvm_combo); then
	for t in $gui_tests; do not_ok "$t" "KernelShark showed no window: $(tail -n 3 ks.log | tr '\n' ' ')"; done
	echo "1..$n"
	exit 1
fi
ks_quit "$w"
if python3 - "$session" "$tmp" >gui1.txt 2>&1 <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
files = [d["data"]["file"] for d in s["data streams"]]
want = [sys.argv[2] + "/out.dat", sys.argv[2] + "/out-g0.dat"]
print("streams:", files)
sys.exit(0 if files == want else 1)
EOF
then
	ok gui_loads_both
else
	not_ok gui_loads_both "$(tr '\n' ' ' <gui1.txt | head -c 300)"
fi

# The same session in a bigger window, 3 ms from the first guest event;
# then the KVM combo plots of both vCPUs, chosen the way a user does:
# Plots > KVM Combo plots, "all", Apply (KernelShark 2.2.1 does not
# restore combo plots from a session file: its loadGraphs() passes zero
# combos).  The clicks are at fixed places of Debian's Qt theme in a
# 1600x1000 Xvfb screen; KernelShark's saved session then says whether
# the combos were made.
python3 - "$session" merged.txt session2.json <<'EOF'
import json, re, sys
s = json.load(open(sys.argv[1]))
first = None
for line in open(sys.argv[2]):
    m = re.match(r'^g0 v\d+ h\S+ .*? (\d+)\.(\d{9}): ', line)
    if m:
        t = int(m.group(1)) * 10**9 + int(m.group(2))
        first = t if first is None else min(first, t)
s["Model"]["range"] = [first - 500000, first + 2500000]
s["MainWindow"] = [1600, 1000]
s["Splitter"] = [760, 180]
json.dump(s, open(sys.argv[3], "w"), indent=1)
EOF
rm -f "$session"
xvfb_alive
if w=$(ks_run -s "$tmp/session2.json" -p kvm_combo) ||
   { ! kill -0 "$xvfb_pid" 2>/dev/null && xvfb_alive && w=$(ks_run -s "$tmp/session2.json" -p kvm_combo); }; then
	xdotool windowsize "$w" 1600 1000 2>/dev/null
	sleep 1
	xdotool mousemove 109 10 click 1 2>/dev/null		# Plots
	sleep 1
	xdotool mousemove 174 84 click 1 2>/dev/null		# KVM Combo plots
	dlg=
	for _ in $(seq 20); do
		dlg=$(xdotool search --name '^KVM Combo plots$' 2>/dev/null | head -n 1)
		[ -n "$dlg" ] && break
		sleep 0.25
	done
	if [ -n "$dlg" ]; then
		sleep 1
		xdotool mousemove --window "$dlg" 86 97 click 1 2>/dev/null	# all
		sleep 0.5
		xdotool mousemove --window "$dlg" 41 601 click 1 2>/dev/null	# Apply
		sleep 3
	fi
	mkdir -p "$shots"
	import -window root "$shots/merge-kernelshark.png" 2>>ks.log
	ks_quit "$w"
else
	not_ok gui_session "KernelShark showed no window for the session (Xvfb $(kill -0 "$xvfb_pid" 2>/dev/null && echo running || echo exited)): $(tail -n 4 ks.log | tr '\n' ' ')"
fi
# Each combo KernelShark saves is its plots, [stream, plot type, id]: the
# guest's vCPU (stream 1) over its host thread (stream 0, the pid).
if python3 - "$session" merged.txt >gui2.txt 2>&1 <<'EOF'
import json, re, sys
saved = json.load(open(sys.argv[1])).get("ComboPlots") or []
got = set()
for combo in saved:
    ids = {p[0]: p[2] for p in combo if isinstance(p, list) and len(p) == 3}
    if 0 in ids and 1 in ids:
        got.add((ids[1], ids[0]))
want = set()
for line in open(sys.argv[2]):
    m = re.match(r'^g0 v(\d+) .*\{tid (\d+),', line)
    if m:
        want.add((int(m.group(1)), int(m.group(2))))
print("combo plots (vCPU, host thread): want", sorted(want), "KernelShark saved", saved)
sys.exit(0 if got == want and len(want) == 2 else 1)
EOF
then
	ok gui_combo_plots
else
	not_ok gui_combo_plots "$(tr '\n' ' ' <gui2.txt | head -c 300)"
fi
# A drawn window has hundreds of colours; an empty or failed one a few.
colours=$(identify -format '%k' "$shots/merge-kernelshark.png" 2>/dev/null || echo 0)
if [ "${colours:-0}" -gt 100 ]; then
	ok gui_screenshot
	if [ "${HGCLOCK_DOC_IMAGES:-0}" = 1 ]; then
		convert "$shots/merge-kernelshark.png" -crop 1600x1000+0+0 +repage \
			"$top/Documentation/images/merge-kernelshark.png"
	fi
else
	not_ok gui_screenshot "$shots/merge-kernelshark.png has $colours colours"
fi
echo "1..$n"
[ "$failed" -eq 0 ]
