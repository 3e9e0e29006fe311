#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The tool's output formats, on the real recording of selftests/data:
# merge --dat (trace-cmd report prints the merge's events), a host trace
# with a buffer instance, --perfetto (decoded against
# user/merge/perfetto_trace.proto, its invariants checked) and the JSON's runs
# and flows.  The second half of the command line's tests (the first:
# test_cli.sh); the two run at once in tools/check.sh and
# tools/asan-check.sh.
#
# The Makefile installs it as BUILD/unit/test_cli_outputs with the source
# tree's path filled in.  TAP on stdout.
#
#   test_cli_outputs [TOOL]     (default: ../user/hgclock next to this script)
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=${HGCLOCK_TOP:-@TOP@}
case $top in @*) top=$(cd "$here/../.." && pwd) ;; esac
tool=${1:-$here/../user/hgclock}
# shellcheck source=selftests/unit/cli_common.sh
. "$top/selftests/unit/cli_common.sh"

# The filters' window end, as test_cli.sh's filter tests take it: the
# time of the whole merge's 30000th event.
run -- "${merge_in[@]}" -o all.txt
to=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
	if (++k == 30000) print substr($i, 1, length($i) - 1); break } }' all.txt)
if [ -z "$to" ]; then
	echo "1..0 # SKIP the whole merge printed fewer than 30000 events"
	exit 0
fi
mkapp app-host.hgev 2 hgclock-vm 20

# ---- --dat: trace.dat files for trace-cmd report and KernelShark -----------------
# trace-cmd report -t of the files prints the merge's events, same times
# (ns), same order, same tasks (tools/dat_compare.py).
dat_report() { (cd "$(dirname "$1")" && trace-cmd report -t "${@/#/-i}") 2>report.err; }
if ! command -v trace-cmd >/dev/null; then
	for t in dat_report_same_events dat_filtered_same_events dat_no_time_shift dat_guest_option; do
		skip "$t" "no trace-cmd (tools/deps.sh installs it)"
	done
else
	run -- "${merge_in[@]}" -o dat.txt --dat out.dat
	expect dat_written 0
	dat_report out.dat out-g0.dat >report.txt
	if msg=$(python3 "$top/tools/dat_compare.py" dat.txt report.txt out.dat); then
		ok dat_report_same_events
	else
		not_ok dat_report_same_events "${msg//$'\n'/ | }"
	fi
	run -- "${merge_in[@]}" -o datf.txt --dat outf.dat --guests host,0 --to "$to" --events kvm,sched_switch
	dat_report outf.dat outf-g0.dat >reportf.txt
	if msg=$(python3 "$top/tools/dat_compare.py" datf.txt reportf.txt outf.dat) &&
	   [ "$(wc -l <datf.txt)" -lt "$(wc -l <dat.txt)" ]; then
		ok dat_filtered_same_events
	else
		not_ok dat_filtered_same_events "${msg//$'\n'/ | }"
	fi
	# The guest's TimeShift is not copied (trace-cmd would shift it again);
	# the host file ties the guest's file to its vCPU threads.
	# (Each dump read whole, then searched: "dump | grep -q" fails under
	# pipefail when grep has left before dump's last write, SIGPIPE; 3
	# times in 20 here on guest.dat.)
	opts=$(trace-cmd dump --options out-g0.dat 2>&1)
	in_opts=$(trace-cmd dump --options guest.dat 2>&1)
	if grep -q 'TRACEID' <<<"$opts" && ! grep -qi 'TimeShift' <<<"$opts" &&
	   grep -q TimeShift <<<"$in_opts"; then
		ok dat_no_time_shift
	else
		not_ok dat_no_time_shift "$(tr '\n' ' ' <<<"$opts" | cut -c1-200)"
	fi
	opts=$(trace-cmd dump --options out.dat 2>&1)
	guest_opt=$(grep -A5 'Option GUEST' <<<"$opts")
	if grep -q '^ *0 219 \[guest cpu, host pid\]' <<<"$guest_opt" &&
	   grep -q '^ *1 220 \[guest cpu, host pid\]' <<<"$guest_opt"; then
		ok dat_guest_option
	else
		not_ok dat_guest_option "$(tr '\n' ' ' <<<"$guest_opt")"
	fi
	# Version 6 inputs (no sections, no compression): version 6 files out.
	if trace-cmd convert -i host.dat -o host6.dat --file-version 6 --compression none \
		>/dev/null 2>&1 && trace-cmd convert -i guest.dat -o guest6.dat --file-version 6 \
		--compression none >/dev/null 2>&1; then
		run -- merge merge.hgc host6.dat guest6.dat -q -o dat6.txt --dat out6.dat
		dat_report out6.dat out6-g0.dat >report6.txt
		if [ "$rc" = 0 ] && [ -z "$err" ] &&
		   msg=$(python3 "$top/tools/dat_compare.py" dat6.txt report6.txt out6.dat) &&
		   cmp -s dat6.txt dat.txt; then
			ok dat_version6_same_events
		else
			not_ok dat_version6_same_events "exit $rc, ${err:0:200} ${msg//$'\n'/ | }"
		fi
	else
		skip dat_version6_same_events "trace-cmd convert failed"
	fi
	run -- "${merge_in[@]}" -o dat2.txt --dat guest.dat
	expect dat_output_is_input_refused 2 'guest.dat.*input'
	unchanged dat_output_is_input_unchanged guest.dat
	no_temp_left dat_no_temp_left
	# A disruption (gen_disrupt adds one to a copy of the recording:
	# guest 0 gone after the last host record): one mark, at the same
	# time and in the same words, in the text (a DISRUPTION line), the
	# JSON (a global instant) and the host's trace.dat (a print event
	# that trace-cmd report shows; dat_compare.py with the rest).
	if [ ! -x "$here/bin/gen_disrupt" ]; then
		for t in disruption_marked_text disruption_marked_dat disruption_marked_json; do
			skip "$t" "no $here/bin/gen_disrupt (make builds it with test_cli)"
		done
	elif "$here/bin/gen_disrupt" merge.hgc gone.hgc 0 2>gen.err; then
		run -- merge gone.hgc host.dat guest.dat -o gone.txt --json gone.json --dat gone.dat
		marks=$(grep -c '^hgclock  *[0-9.]*: DISRUPTION guest 0 (incarnation 0): gone, VM 201 (CID 3); it never came back$' gone.txt)
		if [ "$rc" = 0 ] && [ "$marks" = 1 ] && [ "$(grep -c DISRUPTION gone.txt)" = 1 ] &&
		   grep -q '1 of them disruption marks' <<<"$err"; then
			ok disruption_marked_text
		else
			not_ok disruption_marked_text "exit $rc, $marks marks: ${err:0:200}"
		fi
		dat_report gone.dat gone-g0.dat >gone-report.txt
		if msg=$(python3 "$top/tools/dat_compare.py" gone.txt gone-report.txt gone.dat) &&
		   [ "$(grep -c 'print: .*hgclock: DISRUPTION guest 0 (incarnation 0): gone' gone-report.txt)" = 1 ]; then
			ok disruption_marked_dat
		else
			not_ok disruption_marked_dat "${msg//$'\n'/ | }"
		fi
		t_text=$(sed -n 's/^hgclock  *\([0-9.]*\): DISRUPTION.*/\1/p' gone.txt)
		if python3 -c '
import json, sys
t = json.load(open("gone.json"))
m = [e for e in t["traceEvents"] if e.get("cat") == "hgclock" and e.get("ph") == "i"]
want = round(float(sys.argv[1]) * 1e6, 3)
sys.exit(not (len(m) == 1 and abs(float(m[0]["ts"]) - want) < 0.0005 and
              m[0]["args"]["kind"] == "gone"))' "$t_text"; then
			ok disruption_marked_json
		else
			not_ok disruption_marked_json "the JSON's hgclock instants are not the text's mark at $t_text"
		fi
	else
		not_ok disruption_marked_text "gen_disrupt: $(head -c 200 gen.err)"
	fi
fi

# ---- a host trace with a buffer instance (many-host.dat) --------------------------
# The many scenario's host trace on 6.1 (selftests/data/capture.txt): its
# top buffer holds the boot's sched events, its instance "many" KVM's
# kvm_entry.  Both are the host's: "host buffer many N" in the summary,
# "many: " before the task in the text.  Task names come from the saved
# command lines and from what sched events teach, and libtraceevent's
# answer depends on the order of its lookups and registrations (pid 2 is
# "swapper/0" to trace-cmd report at 0.455846607, its saved name is
# "kthreadd"): every output, every --threads and every filter must name
# the tasks as trace-cmd report of the --dat file does.
if [ -f "$data/many-host.dat" ]; then
	cp "$data/many-host.dat" .
elif [ -f "$data/many-host.dat.xz" ]; then
	xz -dc "$data/many-host.dat.xz" >many-host.dat
fi
if [ ! -s many-host.dat ]; then
	for t in instance_merged instance_names_any_output instance_names_filtered instance_dat_same_events; do
		skip "$t" "no many-host.dat in $data"
	done
else
	run -- merge merge.hgc many-host.dat --threads 1 -o inst1.txt
	n_inst=$(grep -c '^host  *many: ' inst1.txt)
	if [ "$rc" = 0 ] && [ "$n_inst" -gt 0 ] &&
	   grep -q "host [0-9]*; host buffer many $n_inst;" <<<"$err" &&
	   [ "$(grep -c '^host ' inst1.txt)" -gt "$n_inst" ]; then
		ok instance_merged
	else
		not_ok instance_merged "exit $rc, $n_inst instance lines: ${err//$'\n'/ | }"
	fi
	bad=
	for threads in 1 2 3; do
		run -- merge merge.hgc many-host.dat --threads $threads -o inst-j$threads.txt \
			--json inst-j$threads.json
		cmp -s inst1.txt inst-j$threads.txt || bad+=" --threads $threads --json (exit $rc)"
	done
	if [ -z "$bad" ]; then
		ok instance_names_any_output
	else
		not_ok instance_names_any_output "text differs from --threads 1 alone with:$bad"
	fi
	# Leaving the instance's events out keeps the names of the rest.
	run -- merge merge.hgc many-host.dat --threads 2 --events sched -o instf.txt
	if [ "$rc" = 0 ] && [ -s instf.txt ] &&
	   cmp -s instf.txt <(grep -v '^host  *many: ' inst1.txt); then
		ok instance_names_filtered
	else
		not_ok instance_names_filtered "exit $rc: not the unfiltered text's sched lines"
	fi
	if ! command -v trace-cmd >/dev/null; then
		skip instance_dat_same_events "no trace-cmd (tools/deps.sh installs it)"
	else
		run -- merge merge.hgc many-host.dat -o instd.txt --json instd.json --dat inst.dat
		dat_report inst.dat >inst-report.txt
		msg=
		if [ "$rc" = 0 ] &&
		   msg=$(python3 "$top/tools/dat_compare.py" instd.txt inst-report.txt inst.dat) &&
		   cmp -s instd.txt inst1.txt; then
			ok instance_dat_same_events
		else
			not_ok instance_dat_same_events "exit $rc: ${msg//$'\n'/ | }"
		fi
	fi
	rm -f many-host.dat inst*.json
fi

# ---- --perfetto: a native Perfetto trace (protobuf) -------------------------------
# protoc decodes it against user/merge/perfetto_trace.proto (Perfetto's field
# numbers) and tools/pftrace_check.py checks merge.rst's invariants: each
# machine's packets and tracks, slices paired, runs not overlapping on a
# CPU, flows host -> guest, every placed guest event inside its run on both
# sides, and the same trace events at the same ns as merge's text.
pfcheck() { python3 "$top/tools/pftrace_check.py" "$top/user/merge/perfetto_trace.proto" "$@" 2>&1; }
if ! command -v protoc >/dev/null; then
	for t in pftrace_invariants pftrace_filtered pftrace_app_tracks pftrace_interned pftrace_checker_catches pftrace_interning_checker_catches \
		pftrace_analysis_is_the_report pftrace_analysis_checker_catches; do
		skip "$t" "no protoc (tools/deps.sh installs protobuf-compiler)"
	done
else
	run -- "${merge_in[@]}" -o pf.txt --perfetto out.pftrace
	expect pftrace_written 0
	if msg=$(pfcheck out.pftrace pf.txt) && grep -q ' 512 placed on host CPUs' <<<"$msg"; then
		ok pftrace_invariants
	else
		not_ok pftrace_invariants "${msg//$'\n'/ | }"
	fi
	run -- merge merge.hgc host.dat guest.dat --no-text --perfetto alone.pftrace
	expect pftrace_alone_summary 0 'Perfetto trace: alone.pftrace \([1-9][0-9]* events, [1-9][0-9]* vCPU runs'
	if cmp -s out.pftrace alone.pftrace; then ok pftrace_alone_same_bytes; else not_ok pftrace_alone_same_bytes; fi
	run -- "${merge_in[@]}" -o pff.txt --perfetto outf.pftrace --guests host,0 --to "$to" --events kvm,sched_switch
	if msg=$(pfcheck outf.pftrace pff.txt) && [ "$(wc -l <pff.txt)" -lt "$(wc -l <pf.txt)" ] &&
	   [ "$(stat -c %s outf.pftrace)" -lt "$(stat -c %s out.pftrace)" ]; then
		ok pftrace_filtered
	else
		not_ok pftrace_filtered "${msg//$'\n'/ | }"
	fi
	# An application's thread: its own track, "req" a slice on it.
	run -- "${merge_in[@]}" -o pfa.txt --perfetto app.pftrace --app app-host.hgev
	dec=$(protoc --decode=perfetto.protos.Trace --proto_path="$top/user" \
		"$top/user/merge/perfetto_trace.proto" <app.pftrace 2>&1)
	# Slices other than the vCPU runs: the application's (names resolved
	# from the interned strings by the checker's decode()).
	apps=$(python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from pftrace_check import decode, one
n = 0
for p in decode(sys.argv[2], sys.argv[3]):
    te = one(p, "track_event")
    if te is not None and one(te, "type") == "TYPE_SLICE_BEGIN" and one(te, "categories") == "app":
        n += 1
print(n)' "$top/tools" "$top/user/merge/perfetto_trace.proto" app.pftrace 2>&1)
	if msg=$(pfcheck app.pftrace pfa.txt) && grep -q 'thread_name: "cliapp 77 (app)"' <<<"$dec" &&
	   [ "${apps:-0}" -gt 0 ] 2>/dev/null; then
		ok pftrace_app_tracks
	else
		not_ok pftrace_app_tracks "${msg//$'\n'/ | } app slices: $apps"
	fi
	# Interned (merge.rst): each string once per sequence, in the packet
	# that first uses it; events name them by iid, none inline.
	interned=$(python3 -c '
import collections, sys
sys.path.insert(0, sys.argv[1])
from pftrace_check import checkrun, one, parse
r = checkrun.run(["protoc", "--decode=perfetto.protos.Trace", "--proto_path=" + sys.argv[2].rsplit("/", 1)[0],
                  sys.argv[2]], stdin=open(sys.argv[3], "rb"), capture_output=True, text=True)
defs, inline, by_iid = collections.Counter(), 0, 0
for p in parse(r.stdout).get("packet", []):
    seq = one(p, "trusted_packet_sequence_id")
    for d in p.get("interned_data", []):
        for kind in ("event_names", "event_categories", "debug_annotation_names"):
            for e in d.get(kind, []):
                defs[(seq, kind, one(e, "name"))] += 1
    te = one(p, "track_event")
    if te is not None:
        inline += "name" in te or "categories" in te or any("name" in a for a in te.get("debug_annotations", []))
        by_iid += "name_iid" in te
twice = [k for k, n in defs.items() if n > 1]
print("%d strings, %d defined twice, %d events with an inline name, %d by iid" %
      (len(defs), len(twice), inline, by_iid))' "$top/tools" "$top/user/merge/perfetto_trace.proto" out.pftrace 2>&1)
	if [[ $interned =~ ^[1-9][0-9]*\ strings,\ 0\ defined\ twice,\ 0\ events\ with\ an\ inline\ name,\ [1-9] ]]; then
		ok pftrace_interned
		echo "# pftrace_interned: $interned; $(stat -c %s out.pftrace) bytes"
	else
		not_ok pftrace_interned "$interned"
	fi
	# The checker fails when it should: an event missing from the text, a cut file.
	sed '1000d' pf.txt >pf-less.txt
	head -c 100000 out.pftrace >cut.pftrace
	if ! pfcheck out.pftrace pf-less.txt >/dev/null && ! pfcheck cut.pftrace >/dev/null; then
		ok pftrace_checker_catches
	else
		not_ok pftrace_checker_catches "a changed text or a cut file passed"
	fi
	# ... and when the interning breaks Perfetto's rules: an iid never
	# defined, one used without SEQ_NEEDS_INCREMENTAL_STATE, a sequence
	# interning before its state was cleared (and a good one passes).
	if msg=$(python3 -c '
import collections, sys
sys.path.insert(0, sys.argv[1])
from pftrace_check import resolve_interned
def dd(**kw):
    d = collections.defaultdict(list)
    for k, v in kw.items():
        d[k] = v if isinstance(v, list) else [v]
    return d
def packets(flags0=1, flags1=2, iid=1):
    names = dd(event_names=[dd(iid=1, name="e")])
    return [dd(trusted_packet_sequence_id=1, sequence_flags=flags0, interned_data=names),
            dd(trusted_packet_sequence_id=1, sequence_flags=flags1, track_event=dd(name_iid=iid))]
good = packets()
assert resolve_interned(good) is None and good[1]["track_event"][0]["name"] == ["e"], "good"
assert resolve_interned(packets(iid=2)), "undefined iid"
assert resolve_interned(packets(flags1=0)), "no SEQ_NEEDS_INCREMENTAL_STATE"
assert resolve_interned(packets(flags0=0)), "not cleared"
print("caught")' "$top/tools" 2>&1) && [ "$msg" = caught ]; then
		ok pftrace_interning_checker_catches
	else
		not_ok pftrace_interning_checker_catches "${msg//$'\n'/ | }"
	fi
	run -- "${merge_in[@]}" -o pf2.txt --perfetto guest.dat
	expect pftrace_output_is_input_refused 2 'guest.dat.*input'
	unchanged pftrace_output_is_input_unchanged guest.dat
	run -- "${merge_in[@]}" --no-text --perfetto /dev/full
	expect pftrace_full_device 1 'perfetto.*No space left on device'
	no_temp_left pftrace_no_temp_left
	# With --analyze: each guest thread's time on the host, a track per
	# thread (analyze.rst, "In Perfetto"); tools/pftrace_analyze_check.py
	# holds it to the same run's report: slices add up to each thread's
	# wall, pieces to its split by component and exit reason, to the ns.
	run -- merge merge.hgc host.dat guest.dat -o pfan.txt --analyze-json pfan.json --perfetto an.pftrace
	expect pftrace_analysis_summary 0 'guest threads on the host: [1-9][0-9]* slices with [1-9][0-9]* exits'
	ancheck() { python3 "$top/tools/pftrace_analyze_check.py" "$top/user/merge/perfetto_trace.proto" "$@" 2>&1; }
	if msg=$(ancheck an.pftrace pfan.json) && pfmsg=$(pfcheck an.pftrace pfan.txt); then
		ok pftrace_analysis_is_the_report
	else
		not_ok pftrace_analysis_is_the_report "${msg//$'\n'/ | } ${pfmsg:-}"
	fi
	# The checker fails when it should: a report 1 ns off, a trace without the analysis.
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = max(r["threads"], key=lambda t: t["split"]["exits"])
t["split"]["exits"] += 1
t["split"]["exit_reasons"][0]["ns"] += 1
json.dump(r, open(sys.argv[2], "w"))' pfan.json pfan-off.json
	if ! ancheck an.pftrace pfan-off.json >/dev/null && ! ancheck out.pftrace pfan.json >/dev/null; then
		ok pftrace_analysis_checker_catches
	else
		not_ok pftrace_analysis_checker_catches "a report 1 ns off or a trace without the analysis passed"
	fi
	# One pass of the engine draws the analysis and writes its reports:
	# the same bytes as merge --analyze* alone; a Perfetto trace that
	# fails leaves no report behind either.
	run -- "${merge_in[@]}" --no-text --analyze a1.txt --analyze-json a1.json --analyze-svg a1.svg
	run -- "${merge_in[@]}" --no-text --analyze a2.txt --analyze-json a2.json --analyze-svg a2.svg \
		--perfetto a2.pftrace
	expect pftrace_analysis_with_reports 0
	if [ -s a1.txt ] && cmp a1.txt a2.txt && cmp a1.json a2.json && cmp a1.svg a2.svg; then
		ok pftrace_analysis_reports_same_bytes
	else
		not_ok pftrace_analysis_reports_same_bytes "the reports differ with --perfetto"
	fi
	rm -f a3.txt
	run -- "${merge_in[@]}" --no-text --analyze a3.txt --perfetto /dev/full
	if [ "$rc" -eq 1 ] && [ ! -e a3.txt ] && ! ls a3.txt.tmp-* >/dev/null 2>&1; then
		ok pftrace_analysis_failed_leaves_no_report
	else
		not_ok pftrace_analysis_failed_leaves_no_report "exit $rc; $(ls a3.txt* 2>&1)"
	fi
fi
# The JSON: each vCPU run on its host CPU and on its guest CPU, a flow
# from the one to the other at the run's start.
run -- "${merge_in[@]}" --no-text --json runs.json
if msg=$(python3 - runs.json <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
host = [e for e in ev if e.get("ph") == "X" and e["pid"] == 1]
guest = [e for e in ev if e.get("ph") == "X" and e["pid"] >= 100]
s = {e["id"]: e for e in ev if e.get("ph") == "s"}
f = {e["id"]: e for e in ev if e.get("ph") == "f"}
bad = [i for i in s if i not in f or f[i]["ts"] != s[i]["ts"] or f[i]["pid"] < 100]
print(len(host), len(guest), len(s), len(bad))
sys.exit(0 if host and len(guest) == len(host) == len(s) == len(f) and not bad else 1)
PY
); then
	ok json_runs_both_sides_flows
else
	not_ok json_runs_both_sides_flows "$msg"
fi

# The analysis alone (--no-text, no other output): its own pass gives the
# summary's counts, the same as merge's text pass, with an application
# input too; a filter's counts still come from the filtered pass.
sumline() { grep '^hgclock merge: [0-9]* events' <<<"$err"; }
run -- merge merge.hgc host.dat guest.dat --app app-host.hgev -o /dev/null
s1=$(sumline)
run -- merge merge.hgc host.dat guest.dat --app app-host.hgev --no-text --analyze an-only.txt
s2=$(sumline)
run -- merge merge.hgc host.dat guest.dat --to "$to" -o /dev/null
s3=$(sumline)
run -- merge merge.hgc host.dat guest.dat --to "$to" --no-text --analyze an-only2.txt
s4=$(sumline)
if [ -n "$s1" ] && [ "$s1" = "$s2" ] && [ -n "$s3" ] && [ "$s3" = "$s4" ] && [ "$s1" != "$s3" ] &&
   [ -s an-only.txt ]; then
	ok analyze_only_summary_same
else
	not_ok analyze_only_summary_same "text pass: '$s1' / '$s3'; analysis alone: '$s2' / '$s4'"
fi

# merge --analyze (Documentation/analyze.rst): every thread's and vCPU's
# split adds up to its wall time, and the exits counted by reason are
# the host trace's kvm_exit lines by reason (HLT: a component of its own).
run -- "${merge_in[@]}" --no-text --analyze analyze.txt --analyze-json analyze.json
if msg=$(python3 - analyze.json all.txt <<'PY'
import collections, json, re, sys
r = json.load(open(sys.argv[1]))
comps = ["guest", "exits", "preempted", "host_blocked", "halted", "disrupted", "unknown"]
bad = []
for t in r["threads"]:
    s = t["split"]
    if sum(s[c] for c in comps) != t["wall_ns"]:
        bad.append("thread %d: split %d != wall %d" % (t["tid"], sum(s[c] for c in comps), t["wall_ns"]))
for v in r["vcpus"] + [{"split": r["all"]}]:
    s = v["split"]
    if sum(e["ns"] for e in s["exit_reasons"]) != s["exits"]:
        bad.append("exit reasons do not add up to exits")
names = {"CPUID": "CPUID", "MSR": "MSR", "INTR": "INTR", "NPF": "NPF", "VINTR": "VINTR",
         "VMMCALL": "VMMCALL"}
host = collections.Counter(m.group(1) for m in
                           re.finditer(r"kvm_exit +reason EXIT_([A-Z_0-9]+)", open(sys.argv[2]).read()))
got = {e["reason"]: e["count"] for e in r["all"]["exit_reasons"]}
for k, v in host.items():
    if k != "HLT" and got.get(k) != v:
        bad.append("%s: %s exits counted, %d in the host trace" % (k, got.get(k), v))
if not any("no sched_switch on the host" in l for l in r["cannot_split"]):
    bad.append("the missing host sched_switch not said")
if not r["threads"] or not host:
    bad.append("no threads or no exits")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
) && grep -q '^guest 0: ' analyze.txt && grep -q 'exits by reason:' analyze.txt; then
	ok analyze_adds_up_exits_match_host
else
	not_ok analyze_adds_up_exits_match_host "$msg"
fi
# --from/--to clip the split: the vCPUs' time is the window's
from_a=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
	if (++k == 10000) print substr($i, 1, length($i) - 1); break } }' all.txt)
run -- "${merge_in[@]}" --no-text --from "$from_a" --to "$to" --analyze-json analyze-w.json
if msg=$(python3 - analyze-w.json "$from_a" "$to" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = round(float(sys.argv[2]) * 1e9); t = round(float(sys.argv[3]) * 1e9)
comps = ["guest", "exits", "preempted", "host_blocked", "halted", "disrupted", "unknown"]
w = [sum(v["split"][c] for c in comps) for v in r["vcpus"]]
print(w, t + 1 - f, r["from_ns"], r.get("to_ns"))
sys.exit(0 if w and max(w) <= t + 1 - f and max(w) > (t - f) // 2 and r["from_ns"] == f else 1)
PY
); then
	ok analyze_window
else
	not_ok analyze_window "$msg"
fi

# --analyze-svg: well-formed SVG, a bar per thread (the 20 longest), each
# bar's parts the JSON's split of that thread, in the same ns.
run -- "${merge_in[@]}" --no-text --analyze-json analyze-s.json --analyze-svg analyze.svg
if [ "$rc" = 0 ] && msg=$(python3 - analyze-s.json analyze.svg <<'PY'
import collections, json, re, sys
import xml.etree.ElementTree as ET
r = json.load(open(sys.argv[1]))
root = ET.parse(sys.argv[2]).getroot()
ns = "{http://www.w3.org/2000/svg}"
bars = collections.defaultdict(dict)
for rect in root.iter(ns + "rect"):
    title = rect.find(ns + "title")
    if title is None:
        continue
    m = re.fullmatch(r"(\w+) (\d+) ns", title.text)
    if m:
        bars[rect.get("y")][m.group(1)] = int(m.group(2))
comps = ["guest", "exits", "preempted", "host_blocked", "halted", "disrupted", "unknown"]
want = sorted(({c: t["split"][c] for c in comps if t["split"][c]} for t in r["threads"]
               if t["tid"] > 0 and sum(t["split"][c] for c in comps)),
              key=lambda d: -sum(d.values()))[:20]
got = sorted(bars.values(), key=lambda d: -sum(d.values()))
bad = []
if not got:
    bad.append("no bar")
if sorted(tuple(sorted(d.items())) for d in got) != sorted(tuple(sorted(d.items())) for d in want):
    bad.append("bars %s, JSON %s" % (got[:2], want[:2]))
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
); then
	ok analyze_svg_bars_are_the_split
else
	not_ok analyze_svg_bars_are_the_split "exit $rc: $msg"
fi

# Per request (analyze.rst): a guest application's begin/end (two
# requests of sh:167, one nested begin, an end without a begin, a request
# never ended) and --analyze-slice pairs: each request's components add
# up to its wall time, the bad input is counted, nothing else split.
# The requests' times below are host times; the app file's stamps are
# those less 75766537063 ns, the guest's sched_clock (the guest booted
# that long after the host VM: trace-cmd's TimeShift says 75765688415,
# report -t shows the guest's events shifted by it).
python3 - app-req.hgev <<'PY'
import struct, sys
off = 75766537063
hdr = b"HGCLKEVT" + struct.pack("<IIIIII", 1, 128, 2, 0, 4242, 0)
hdr += b"reqapp".ljust(16, b"\0") + b"guest".ljust(72, b"\0") + bytes(8)
def rec(kind, ts, tid, name):
    size = (24 + len(name) + 7) & ~7
    body = struct.pack("<HBBIQIHH", size, kind, 1, 1, ts - off, tid, len(name), 0) + name
    return body.ljust(size, b"\0")
r = rec(2, 253075000000, 167, b"req") + rec(2, 253100000000, 167, b"inner")
r += rec(3, 253110000000, 167, b"inner") + rec(3, 253160000000, 167, b"req")
r += rec(3, 253500000000, 166, b"req") + rec(2, 254000000000, 167, b"req")
r += rec(3, 254330000000, 167, b"req") + rec(2, 254350000000, 166, b"req")
open(sys.argv[1], "wb").write(hdr + r)
PY
run -- "${merge_in[@]}" --guest-app 0=app-req.hgev --no-text --analyze analyze-r.txt \
	--analyze-json analyze-r.json --analyze-svg analyze-r.svg
if [ "$rc" = 0 ] && msg=$(python3 - analyze-r.json <<'PY'
import json, re, sys
q = json.load(open(sys.argv[1]))["requests"]
comps = ["running", "runqueue", "preempted", "exits", "halted", "blocked", "host_blocked",
         "disrupted", "unknown", "unsplit"]
bad = []
want = {"split": 2, "wall_ns": 415000000, "nested_begins": 1, "ends_without_begin": 1,
        "never_ended": 1, "uncertain": 0}
for k, v in want.items():
    if q[k] != v:
        bad.append("%s %s, want %s" % (k, q[k], v))
walls = sorted(s["wall_ns"] for s in q["slowest"])
if walls != [85000000, 330000000]:
    bad.append("walls %s" % walls)
for s in q["slowest"] + [{"split": q["all"], "wall_ns": q["wall_ns"]}]:
    sp = s["split"]
    if sum(sp[c] for c in comps) != s["wall_ns"]:
        bad.append("split %d != wall %d" % (sum(sp[c] for c in comps), s["wall_ns"]))
    if sum(e["ns"] for e in sp["exit_reasons"]) != sp["exits"]:
        bad.append("exit reasons do not add up")
    # who ran instead on the guest's run queue: a guest thread, the idle
    # task or (unknown), adding up to the run queue's time
    if sum(e["ns"] for e in sp["runqueue_by"]) != sp["runqueue"]:
        bad.append("runqueue_by does not add up: %s" % sp["runqueue_by"])
    for e in sp["runqueue_by"]:
        if not re.fullmatch(r"0:(.+-%d|\(idle\))" % e.get("tid", -1), e["thread"]) and \
           e["thread"] != "(unknown)":
            bad.append("runqueue_by thread %s" % e)
if not q["all"]["running"] or not q["all"]["blocked"] or not q["all"]["exits"] or \
   not q["all"]["runqueue_by"]:
    bad.append("running, blocked, exits or runqueue_by empty: %s" % q["all"])
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
) && grep -q '^# 1 ends without a begin' analyze-r.txt &&
	grep -q '^# 1 requests never ended: not split' analyze-r.txt &&
	grep -q '^slowest 2:' analyze-r.txt && grep -Eq '^  wall  +[0-9]+' analyze-r.txt; then
	ok analyze_requests_app
else
	not_ok analyze_requests_app "exit $rc: $msg ${err//$'\n'/ | }"
fi

# One clock, two paths (analyze.rst once called it unexplained): an
# application instant stamped with the raw guest sched_clock of a guest
# trace event (trace-cmd report --raw-ts, before any TimeShift) lands at
# that event's host time to the ns.  An offset between the two mappings
# (the guest's 75.8 s boot offset applied to one path only) fails it.
if ! command -v trace-cmd >/dev/null; then
	skip app_stamp_maps_as_guest_trace "no trace-cmd (tools/deps.sh installs it)"
elif msg=$(trace-cmd report --raw-ts -i guest.dat 2>/dev/null | python3 -c '
import re, struct, sys
seen, recs = set(), b""
for line in sys.stdin:
    m = re.search(r"-(\d+)\s+\[(\d+)\]\s*(\d+):\s+(\w+):", line)
    if not m or m.group(4) != "sched_switch" or int(m.group(3)) in seen:
        continue
    ts = int(m.group(3))
    seen.add(ts)
    name = b"at_%d" % ts
    size = (24 + len(name) + 7) & ~7
    recs += (struct.pack("<HBBIQIHH", size, 1, 1, int(m.group(2)), ts, int(m.group(1)),
                         len(name), 0) + name).ljust(size, b"\0")
    if len(seen) == 40:
        break
hdr = b"HGCLKEVT" + struct.pack("<IIIIII", 1, 128, 2, 0, 4242, 0)
hdr += b"clockapp".ljust(16, b"\0") + b"guest".ljust(72, b"\0") + bytes(8)
open("app-raw.hgev", "wb").write(hdr + recs)
print(len(seen))
') && [ "${msg:-0}" -ge 10 ] &&
	run -- "${merge_in[@]}" --guest-app 0=app-raw.hgev -o app-raw.txt && [ "$rc" = 0 ] &&
	msg=$(python3 - app-raw.txt <<'PY'
import re, sys
want, trace = {}, set()
for line in open(sys.argv[1]):
    m = re.match(r"g0 \S+ \S+\s+\S+\s+\[\d+\] (\d+)\.(\d{9}): (\S+)", line)
    if not m:
        continue
    host_ns = int(m.group(1)) * 10**9 + int(m.group(2))
    a = re.fullmatch(r"app:at_(\d+)", m.group(3))
    if a:
        want[int(a.group(1))] = host_ns
    elif m.group(3) == "sched_switch":
        trace.add(host_ns)
off = [t for t in want.values() if t not in trace]
print("%d instants, %d at no sched_switch's host time%s" %
      (len(want), len(off), (": first " + str(off[0])) if off else ""))
sys.exit(1 if off or len(want) < 10 else 0)
PY
); then
	echo "# $msg"
	ok app_stamp_maps_as_guest_trace
else
	not_ok app_stamp_maps_as_guest_trace "exit $rc: $msg ${err//$'\n'/ | }"
fi
# The picture's request bars (issue 32: bars per request): one per
# slowest request, each bar's parts the JSON's split of that request;
# the thread bars stay in their own group.
if [ "$rc" = 0 ] && msg=$(python3 - analyze-r.json analyze-r.svg <<'PY'
import json, re, sys
import xml.etree.ElementTree as ET
q = json.load(open(sys.argv[1]))["requests"]
root = ET.parse(sys.argv[2]).getroot()
ns = "{http://www.w3.org/2000/svg}"
comps = ["running", "runqueue", "preempted", "exits", "halted", "blocked", "host_blocked",
         "disrupted", "unknown", "unsplit"]
groups = {g.get("id"): g for g in root.iter(ns + "g")}
bad = []
if set(groups) != {"threads", "requests"}:
    bad.append("groups %s" % sorted(groups))
else:
    bars = {}
    for rect in groups["requests"].iter(ns + "rect"):
        m = re.fullmatch(r"(\w+) (\d+) ns", rect.find(ns + "title").text)
        bars.setdefault(rect.get("y"), {})[m.group(1)] = int(m.group(2))
    got = [bars[y] for y in sorted(bars, key=float)]
    want = [{c: s["split"][c] for c in comps if s["split"][c]} for s in q["slowest"]]
    if got != want:
        bad.append("request bars %s, JSON %s" % (got, want))
    # each request that waited on the run queue names whom it waited behind most
    behind = [t.text for t in groups["requests"].iter(ns + "text") if t.text and "most behind 0:" in t.text]
    if len(behind) != sum(1 for s in q["slowest"] if s["split"]["runqueue"]):
        bad.append("'most behind' labels %s" % behind)
    if not len(groups["threads"].findall(ns + "rect")):
        bad.append("no thread bar")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
); then
	ok analyze_svg_request_bars_are_the_split
else
	not_ok analyze_svg_request_bars_are_the_split "exit $rc: $msg"
fi
run -- "${merge_in[@]}" --no-text --analyze-slice sched:sched_wakeup,sched_switch \
	--analyze-json analyze-s.json
if [ "$rc" = 0 ] && msg=$(python3 - analyze-s.json <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["requests"]
comps = ["running", "runqueue", "preempted", "exits", "halted", "blocked", "host_blocked",
         "disrupted", "unknown", "unsplit"]
s = q["all"]
print(q["split"], q["wall_ns"], sum(s[c] for c in comps))
sys.exit(0 if q["split"] > 10 and sum(s[c] for c in comps) == q["wall_ns"] and
         q["percentiles"][-1]["component"] == "wall" else 1)
PY
); then
	ok analyze_requests_slice_pair
else
	not_ok analyze_requests_slice_pair "exit $rc: $msg ${err//$'\n'/ | }"
fi
run -- "${merge_in[@]}" --no-text --analyze-slice sched_switch --analyze x.txt
expect analyze_slice_not_a_pair 2 'analyze-slice: not BEGIN,END'
run -- "${merge_in[@]}" -o x.txt --analyze-slice a,b
expect analyze_slice_needs_analyze 2 'analyze-slice is for --analyze'

echo "1..$n"
[ "$failed" -eq 0 ]
