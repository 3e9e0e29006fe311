#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The hgclock tool's command line, without the module: outputs never
# clobber inputs, every failed write is an error, inputs that are not
# regular files are refused at once, one rule for exit statuses, help
# like git's, one clock-name parser, merge checks what its inputs claim,
# and the documented options match the code (Documentation/tools.rst,
# Documentation/man), application event files and merge's filters.  Uses
# the real recording of selftests/data.  The output formats (--dat,
# --perfetto, the JSON) are test_cli_outputs.sh's; the two run at once.
#
# The Makefile installs it as BUILD/unit/test_cli with the source tree's
# path filled in; tools/check.sh's unit loop runs it.  TAP on stdout.
#
#   test_cli [TOOL]     (default: ../user/hgclock next to this script)
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=${HGCLOCK_TOP:-@TOP@}
case $top in @*) top=$(cd "$here/../.." && pwd) ;; esac
tool=${1:-$here/../user/hgclock}
# shellcheck source=selftests/unit/cli_common.sh
. "$top/selftests/unit/cli_common.sh"

# ---- 1. outputs never clobber inputs -------------------------------------

run -- "${merge_in[@]}" -o guest.dat
expect merge_output_is_guest_trace_refused 2 'guest.dat.*input'
unchanged merge_output_is_guest_trace_unchanged guest.dat

run -- "${merge_in[@]}" -o merge.hgc
expect merge_output_is_corr_refused 2 'merge.hgc.*input'
unchanged merge_output_is_corr_unchanged merge.hgc

ln -s guest.dat link.dat
run -- "${merge_in[@]}" -o link.dat
expect merge_output_symlink_to_input_refused 2 'input'
unchanged merge_output_symlink_to_input_unchanged guest.dat
rm -f link.dat

run -- "${merge_in[@]}" --json same.out -o same.out
expect merge_json_and_text_same_file_refused 2 'same destination'
if [ -e same.out ]; then not_ok merge_json_and_text_same_file_not_created; else ok merge_json_and_text_same_file_not_created; fi

run -- "${merge_in[@]}" --json -
expect merge_json_stdout_and_text_stdout_refused 2 'standard output'
[ -s out.txt ] && not_ok merge_json_stdout_nothing_written || ok merge_json_stdout_nothing_written

run -- "${merge_in[@]}" --json - --no-text
if [ "$rc" = 0 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' out.txt 2>/dev/null; then
	ok merge_json_stdout_alone_valid
else
	not_ok merge_json_stdout_alone_valid "exit $rc or invalid JSON"
fi

cp pristine.merge.hgc merge.hgc
timeout 120 "$tool" dump merge.hgc >>merge.hgc 2>err.txt
rc=$?
err=$(cat err.txt)
expect dump_stdout_is_input_refused 2 'standard output is the input'
unchanged dump_stdout_is_input_unchanged merge.hgc

# A failed write keeps the old file: a size limit of 100 KiB (SIGXFSZ
# ignored, so that the write fails with EFBIG).
echo "old timeline" >timeline.txt
cp timeline.txt pristine.timeline.txt
cp pristine.merge.hgc merge.hgc
for threads in 1 2; do
	(trap '' XFSZ; ulimit -f 100; exec timeout 120 "$tool" "${merge_in[@]}" --threads $threads \
		-o timeline.txt) >/dev/null 2>err.txt
	rc=$?
	err=$(cat err.txt)
	expect "merge_failed_write_t${threads}_error" 1 'timeline.txt: .*File too large'
	unchanged "merge_failed_write_t${threads}_old_file_kept" timeline.txt
done
no_temp_left merge_failed_write_no_temp_left

chmod 640 timeline.txt
run -- "${merge_in[@]}" -o timeline.txt
expect merge_replaces_output 0
if [ "$(stat -c %a timeline.txt)" = 640 ] && grep -q '^g0 ' timeline.txt; then
	ok merge_replaced_output_keeps_mode
else
	not_ok merge_replaced_output_keeps_mode "mode $(stat -c %a timeline.txt) or no guest lines"
fi
no_temp_left merge_success_no_temp_left

# Killed by a signal (here SIGPIPE, the JSON's reader gone): the text's
# temporary file goes too, and the old file stays.
echo "old" >killed.txt
timeout 120 "$tool" "${merge_in[@]}" -o killed.txt --json - 2>/dev/null | head -c 10 >/dev/null
if [ "$(cat killed.txt)" = old ]; then ok merge_killed_old_file_kept; else not_ok merge_killed_old_file_kept; fi
no_temp_left merge_killed_no_temp_left

run /dev/full -- "${merge_in[@]}"
expect merge_stdout_full 1 'standard output: .*No space left on device'
[ "$(grep -c . <<<"$err")" = 1 ] && ok merge_stdout_full_said_once ||
	not_ok merge_stdout_full_said_once "${err//$'\n'/ | }"
run -- "${merge_in[@]}" -o /dev/full
expect merge_output_dev_full 1 '/dev/full: .*No space left on device'
run -- "${merge_in[@]}" --no-text --json /dev/full
expect merge_json_dev_full 1 '/dev/full: .*No space left on device'

run /dev/full -- dump merge.hgc
expect dump_stdout_full 1 'standard output: No space left on device'
run /dev/full -- dump --json --summary merge.hgc
expect dump_json_stdout_full 1 'standard output: No space left on device'
run /dev/full -- convert merge.hgc 1000 2000
expect convert_stdout_full 1 'standard output: No space left on device'
run /dev/full -- --help
expect help_stdout_full 1 'standard output: No space left on device'
run /dev/full -- dump --help
expect dump_help_stdout_full 1 'standard output'

run /dev/full -- plot merge.hgc -o -
expect plot_stdout_full_named 1 'standard output: No space left on device'
if grep -q -- '^hgclock: -:' <<<"$err"; then not_ok plot_stdout_not_named_dash; else ok plot_stdout_not_named_dash; fi
run -- plot merge.hgc -o merge.hgc
expect plot_output_is_input_refused 2 'input'
unchanged plot_output_is_input_unchanged merge.hgc
run -- plot merge.hgc -o /dev/full
expect plot_output_dev_full 1 '/dev/full: No space left on device'

run -- record -o -
expect record_stdout_refused 2 'record writes a file'

# record's command line without the module: 1024 guests are accepted
# (exit 3 only for the missing device), a 1025th is refused; with a
# COMMAND, nothing runs when the recording cannot start.
guests=()
for i in $(seq 1 1025); do guests+=(--guest "vsock:$((i + 2))"); done
run -- record -o many.hgc --require-all "${guests[@]:0:2048}"
expect record_1024_guests_accepted 3 '/dev/hgclock'
run -- record -o many.hgc "${guests[@]}"
expect record_1025_guests_refused 2 'at most 1024 guests'
run -- record -o cmd.hgc -- sh -c 'echo ran >ran.txt'
expect record_command_without_device 3 '/dev/hgclock'
if [ -e ran.txt ] || [ -e cmd.hgc ]; then not_ok record_command_not_run; else ok record_command_not_run; fi
unset guests

# record --merge OUT: its command-line errors are exit 2, one line, before
# the device is opened or COMMAND run (the merge itself: vm-tests.sh,
# record_merge_*).  OUT may be neither the correlation file nor a trace
# to merge (trace.dat by default).
run -- record -o m.hgc --merge m.txt
expect record_merge_without_command 2 '^hgclock: --merge m.txt needs a COMMAND'
run -- record -o m.hgc --merge m.hgc -- sh -c 'echo ran >ran.txt'
expect record_merge_out_is_corr_refused 2 'm.hgc: the output is the input file m.hgc'
run -- record -o m.hgc --merge trace.dat -- sh -c 'echo ran >ran.txt'
expect record_merge_out_is_default_host_trace_refused 2 \
	'trace.dat: the output is the input file trace.dat'
run -- record -o m.hgc --merge host.dat --merge-host host.dat -- sh -c 'echo ran >ran.txt'
expect record_merge_out_is_host_trace_refused 2 'host.dat: the output is the input file host.dat'
unchanged record_merge_host_trace_unchanged host.dat
run -- record -o m.hgc --guest vm=4242 --merge guest.dat --merge-guest 0=guest.dat -- true
expect record_merge_out_is_guest_trace_refused 2 'guest.dat: the output is the input file guest.dat'
run -- record -o host.dat --merge m.txt --merge-host host.dat -- true
expect record_merge_corr_is_host_trace_refused 2 'host.dat: the output is the input file host.dat'
run -- record -o m.hgc --merge-host host.dat -- true
expect record_merge_host_without_merge 2 'go with --merge OUT'
run -- record -o m.hgc --merge m.txt --merge-guest 0=guest.dat -- true
expect record_merge_guest_without_guests 2 '--merge-guest 0=guest.dat: no guest is recorded'
run -- record -o m.hgc --guest vm=4242 --merge m.txt --merge-guest 1=guest.dat -- true
expect record_merge_guest_id_unknown 2 'no guest 1 in this recording \(guests 0 to 0'
[ "$(grep -c . <<<"$err")" = 1 ] && ok record_merge_error_one_line ||
	not_ok record_merge_error_one_line "${err//$'\n'/ | }"
# A valid --merge gets as far as the device (exit 3): nothing run, nothing written.
run -- record -o m.hgc --guest vm=4242 --merge m.txt --merge-guest 0=guest.dat -- \
	sh -c 'echo ran >ran.txt'
expect record_merge_valid_args 3 '/dev/hgclock'
if [ -e ran.txt ] || [ -e m.hgc ] || [ -e m.txt ]; then
	not_ok record_merge_nothing_run_or_written
else
	ok record_merge_nothing_run_or_written
fi

# ---- 1b. recover: an unfinished file made valid -----------------------------
#
# merge.hgc (written by record) cut in its header, around many section
# boundaries and at spread offsets: recover writes a
# file that dump reads as complete, holding exactly the input's sections
# that ended before the cut, byte for byte, then its note and END.

if python3 - "$tool" merge.hgc <<'EOF2' >recover.log 2>&1
import re, subprocess, sys
tool, src = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
pat = re.compile(r'^section (\S+)\s+at\s+(\d+):\s+(\d+) bytes', re.M)

def sections(path):
    p = subprocess.run([tool, 'dump', '--summary', path], capture_output=True, text=True)
    return p.returncode, p.stdout, [(n, int(o), int(l)) for n, o, l in pat.findall(p.stdout)]

rc, _, full = sections(src)
assert rc == 0 and full[-1][0] == 'end', 'the input must be complete'
ends = [o + 24 + (l + 7) // 8 * 8 for _, o, l in full]
# Each cut is two runs of the tool: about 250 of them (a loaded machine
# starts the tool slowly).  In the file header, around the first sections'
# boundaries and around 30 more spread over the file, at 40 spread offsets.
cuts = {0, 1, 7, 8, 9, 32, 63, 64, 65, 71, 72, 87, 88, 89}
for i in list(range(0, 12)) + list(range(12, len(full), max(1, len(full) // 30))):
    o = full[i][1]
    cuts.update(c for c in (o - 1, o, o + 1, o + 23, o + 24, o + 25) if 0 <= c < len(data))
cuts.update(range(97, len(data), max(1, len(data) // 40)))
cuts.add(full[-1][1])          # the END section itself cut away
bad = 0
for cut in sorted(cuts):
    open('cut.hgc', 'wb').write(data[:cut])
    p = subprocess.run([tool, 'recover', 'cut.hgc', '-o', 'rec.hgc'], capture_output=True, text=True)
    if cut < 64:
        if p.returncode != 6:
            print(f'cut {cut}: exit {p.returncode}, want 6: {p.stderr}'); bad += 1
        continue
    want = [s for s, e in zip(full, ends) if e <= cut and s[0] != 'end']
    keep = ends[len(want) - 1] if want else 64
    rc, out, got = sections('rec.hgc')
    rec = open('rec.hgc', 'rb').read()
    why = None
    if p.returncode != 0:
        why = f'recover exit {p.returncode}: {p.stderr}'
    elif rc != 0 or ', complete' not in out:
        why = f'dump exit {rc}'
    elif got[:-2] != want or [n for n, _, _ in got[-2:]] != ['note', 'end']:
        why = f'{len(got) - 2} sections, want {len(want)}'
    elif rec[:keep] != data[:keep]:
        why = 'kept bytes differ from the input'
    elif f'{cut - keep} dropped' not in p.stderr:
        why = f'stderr does not say {cut - keep} bytes dropped: {p.stderr}'
    if why:
        print(f'cut {cut}: {why}'); bad += 1
print(f'{len(cuts)} cuts, {bad} bad')
sys.exit(1 if bad else 0)
EOF2
then
	ok "recover_every_cut # $(tail -1 recover.log)"
else
	not_ok recover_every_cut "$(head -3 recover.log | tr '\n' ' ')"
fi
run -- recover merge.hgc -o copy.hgc
expect recover_complete_copied 0 'complete .*copied unchanged'
cmp -s copy.hgc merge.hgc && ok recover_complete_same_bytes || not_ok recover_complete_same_bytes
run -- recover merge.hgc -o merge.hgc
expect recover_output_is_input_refused 2 'input'
unchanged recover_output_is_input_unchanged merge.hgc
run -- recover merge.hgc
expect recover_needs_output 2 '-o OUT is required'
head -c 4096 /dev/urandom >garbage.hgc
run -- recover garbage.hgc -o out.hgc
expect recover_garbage_refused 6 'nothing to recover: not an hgclock'
[ -e out.hgc ] && not_ok recover_garbage_no_output || ok recover_garbage_no_output
run -- recover host.dat -o out.hgc
expect recover_trace_dat_refused 6 'bad magic'
# Damage in the middle (a flipped payload byte): the sections before it.
python3 -c 'import sys; d = bytearray(open("merge.hgc", "rb").read()); d[len(d) // 2] ^= 0x40
open("flip.hgc", "wb").write(d)'
run -- recover flip.hgc -o flip-rec.hgc
expect recover_damaged_middle 0 'CRC mismatch.*dropped'
summary=$("$tool" dump --summary flip-rec.hgc 2>/dev/null)
if grep -q ', complete' <<<"$summary"; then
	ok recover_damaged_middle_valid
else
	not_ok recover_damaged_middle_valid
fi
no_temp_left recover_no_temp_left

# ---- 1c. record finds the guests' VMs (fake /proc and libvirt trees) -------
#
# HGCLOCK_PROC, HGCLOCK_LIBVIRT_RUN_DIR and HGCLOCK_VIRSH point record at
# them (Documentation/tools.rst).  A domain that cannot be identified is
# exit 2 with its reason, before anything is opened or created; one that
# is found gets as far as the (missing) device, exit 3.

# fake_proc PID ARG...: a process with that command line.
fake_proc() {
	local pid=$1
	shift
	mkdir -p "vm/proc/$pid"
	printf '%s\0' "$@" >"vm/proc/$pid/cmdline"
}
mkdir -p vm/proc vm/run
fake_proc 200 /usr/bin/qemu-system-x86_64 -name guest=web,debug-threads=on \
	-object "memory-backend-ram,id=$(printf 'x%.0s' $(seq 1 6000))" \
	-device '{"driver":"vhost-vsock-pci","id":"vsock0","guest-cid":4,"vhostfd":"28"}'
mkdir -p vm/proc/200/task/201 vm/proc/200/task/202
echo 'CPU 0/KVM' >vm/proc/200/task/201/comm
echo 'CPU 1/KVM' >vm/proc/200/task/202/comm
fake_proc 800 qemu-system-x86_64 -name guest=nv
fake_proc 910 qemu-system-x86_64 -name guest=dup
fake_proc 911 qemu-system-x86_64 -name guest=dup
echo 200 >vm/run/web.pid
echo 800 >vm/run/nv.pid
echo 999 >vm/run/gone.pid
cat >vm/virsh <<'VIRSH'
#!/bin/sh
case $3 in
stopped) echo "<domain><name>stopped</name></domain>" ;;
*) echo "error: failed to get domain '$3'" >&2; exit 1 ;;
esac
VIRSH
chmod +x vm/virsh
export HGCLOCK_PROC=$PWD/vm/proc HGCLOCK_LIBVIRT_RUN_DIR=$PWD/vm/run HGCLOCK_VIRSH=
run -- record -o vm.hgc --guest domain:nosuch
expect record_domain_unknown_no_virsh 2 "domain:nosuch: no running libvirt domain 'nosuch'"
run -- record -o vm.hgc --guest domain:gone
expect record_domain_stale_pid_file 2 "'gone'.*process 999 is gone"
run -- record -o vm.hgc --guest domain:nv
expect record_domain_without_vsock 2 "domain 'nv' has no vsock device"
run -- record -o vm.hgc --guest domain:dup
expect record_domain_two_qemus 2 'several QEMU processes say -name guest=dup'
run -- record -o vm.hgc --guest domain:
expect record_domain_empty_name 2 'not a libvirt domain name'
HGCLOCK_VIRSH=$PWD/vm/virsh
run -- record -o vm.hgc --guest domain:nosuch
expect record_domain_unknown_virsh 2 "no libvirt domain 'nosuch'"
run -- record -o vm.hgc --guest domain:stopped
expect record_domain_stopped 2 "libvirt domain 'stopped' is not running"
HGCLOCK_VIRSH=
[ "$(grep -c . <<<"$err")" = 1 ] && ok record_domain_error_one_line ||
	not_ok record_domain_error_one_line "${err//$'\n'/ | }"
[ -e vm.hgc ] && not_ok record_domain_nothing_created || ok record_domain_nothing_created
# Found: libvirt's JSON -device 6 KB into the command line, CID 4.
run -- record -o vm.hgc --duration 1 --guest domain:web
expect record_domain_found 3 'domain:web: VM process 200 \(libvirt.s pid file, vsock CID 4\), 2 vCPU threads: CPU 0/KVM 201 CPU 1/KVM 202'
run -- record -o vm.hgc --duration 1 --all-guests
expect record_all_guests_found 3 'guest domain:web: VM process 200'
grep -q "skipping.*'nv' has no vsock" <<<"$err" && ok record_all_guests_skip_said ||
	not_ok record_all_guests_skip_said "${err//$'\n'/ | }"
rm -f vm/run/*.pid
rm -rf vm/proc/200
run -- record -o vm.hgc --all-guests
expect record_all_guests_none 2 'no running VM with a vsock device'
unset HGCLOCK_PROC HGCLOCK_LIBVIRT_RUN_DIR HGCLOCK_VIRSH

# ---- 2. inputs: not regular files, missing, directories --------------------

mkfifo fifo
mkdir dir
# A FIFO must be refused at once, not waited on.
limit=10
for cmd in "dump fifo" "convert fifo 1" "plot fifo" "merge fifo host.dat guest.dat" \
	   "merge merge.hgc fifo guest.dat" "merge merge.hgc host.dat fifo"; do
	# shellcheck disable=SC2086
	run -- $cmd
	name=$(tr ' .' '__' <<<"$cmd")
	expect "fifo_refused_$name" 1 'not a regular file \(a FIFO\)'
done
unset limit
for cmd in "dump dir" "convert dir 1" "plot dir" "merge dir host.dat guest.dat" \
	   "merge merge.hgc host.dat dir"; do
	# shellcheck disable=SC2086
	run -- $cmd
	name=$(tr ' .' '__' <<<"$cmd")
	expect "directory_is_a_directory_$name" 1 'dir: Is a directory'
done
run -- dump /dev/null
expect device_refused 1 'character device'
# One rule: cannot open an input, exit 1; damaged or not ours, exit 6.
for cmd in "dump nosuch.hgc" "convert nosuch.hgc 1" "plot nosuch.hgc" \
	   "merge nosuch.hgc host.dat guest.dat" "merge merge.hgc nosuch.dat guest.dat" \
	   "merge merge.hgc host.dat nosuch.dat"; do
	# shellcheck disable=SC2086
	run -- $cmd
	name=$(tr ' .' '__' <<<"$cmd")
	expect "missing_input_exit_1_$name" 1 'nosuch.*No such file or directory'
done
run -- dump host.dat
expect not_a_corr_file_exit_6 6
run -- merge merge.hgc merge.hgc guest.dat -q --force
expect not_a_trace_exit_6 6 'not a trace-cmd'

# ---- 3. merge checks what its inputs claim ----------------------------------

run -- merge merge.hgc guest.dat host.dat -q -o swapped.txt
expect merge_swapped_traces_refused 6 "guest.dat is a guest's trace.*--force"
[ -e swapped.txt ] && not_ok merge_swapped_no_output || ok merge_swapped_no_output
run -- merge merge.hgc host.dat host.dat -q -o twice.txt
expect merge_same_trace_twice_refused 6 'same file'
run -- merge merge.hgc host.dat --guest 0=guest.dat --guest 0=guest.dat -q -o twice.txt
expect merge_same_guest_trace_twice_refused 6 'same file'
cp guest.dat guest-copy.dat
run -- merge merge.hgc host.dat guest.dat --guest 0=guest-copy.dat -q -o twice.txt
expect merge_duplicate_guest_message 6 "both are guest 0's trace"
if grep -q 'both are guest $\|guest  ' <<<"$err"; then not_ok merge_duplicate_guest_no_blank; else ok merge_duplicate_guest_no_blank; fi
run -- merge merge.hgc guest.dat host.dat -q --force -o forced.txt
expect merge_force_overrides 0
run -- merge merge.hgc --guest 0=host.dat -q -o asguest.txt
expect merge_host_trace_as_guest_refused 6 "host.dat was recorded on the correlation file's host"
[ -e asguest.txt ] && not_ok merge_host_as_guest_no_output || ok merge_host_as_guest_no_output

# Which machine each guest is (GUEST_IDENTITY, sent by agents of protocol
# 1.3): merge.hgc's agent was older, so copies get one written in, before
# END (the END count and the CRCs redone), as record would write it.
# with_identity OUT GUEST NODENAME [MACHINE_ID]
with_identity() {
	python3 - merge.hgc "$@" <<'EOF2'
import struct, sys, zlib
src, dst, gid, node = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
mid = (sys.argv[5] if len(sys.argv) > 5 else '0123456789abcdef0123456789abcdef').encode()
d = open(src, 'rb').read()
pos = struct.unpack_from('<I', d, 12)[0]
out, n = bytearray(d[:pos]), 0
def section(t, flags, payload):
    h = struct.pack('<IIQI', t, flags, len(payload), zlib.crc32(payload))
    return h + struct.pack('<I', zlib.crc32(h)) + payload + bytes(-len(payload) % 8)
while True:
    t, flags, length = struct.unpack_from('<IIQ', d, pos)
    size = 24 + length + (-length % 8)
    if t == 6:
        ident = struct.pack('<II', gid, 0) + node.ljust(72, b'\0') + mid.ljust(40, b'\0')
        ident += b'6a0c2a31-6f8e-4bb4-9c1e-2f4b1a9d0e7c'.ljust(40, b'\0')
        out += section(11, 1, ident) + section(6, flags, struct.pack('<Q', n + 1))
        break
    out += d[pos:pos + size]
    n, pos = n + 1, pos + size
open(dst, 'wb').write(out)
EOF2
}
# guest.dat was recorded in a guest with no host name: uname's "(none)".
if with_identity web1.hgc 0 web1 && with_identity none.hgc 0 '(none)' &&
   with_identity badid.hgc 0 web1 'not hex' && with_identity guest1.hgc 1 web1; then
	run -- dump web1.hgc
	expect dump_guest_identity 0
	grep -q "^guest0: host name 'web1', machine id 0123456789abcdef0123456789abcdef, boot id 6a0c2a31-" out.txt &&
		ok dump_guest_identity_printed || not_ok dump_guest_identity_printed "$(grep '^guest0: host' out.txt)"
	run -- dump --json web1.hgc
	grep -q '"section": "guest_identity", "guest": 0, "nodename": "web1"' out.txt &&
		ok dump_json_guest_identity || not_ok dump_json_guest_identity
	run -- dump badid.hgc
	expect dump_bad_guest_identity_refused 6 'machine id'
	run -- merge web1.hgc host.dat guest.dat -q -o other.txt
	expect merge_trace_of_other_guest_refused 6 \
		"guest 0's trace guest.dat was recorded on host '\(none\)', but guest 0 \(vsock:3\) is 'web1' \(--force merges anyway\)"
	[ "$(grep -c . <<<"$err")" = 1 ] && ok merge_other_guest_one_line || not_ok merge_other_guest_one_line "$err"
	[ -e other.txt ] && not_ok merge_other_guest_no_output || ok merge_other_guest_no_output
	run -- merge web1.hgc host.dat guest.dat -q --force -o forced.txt
	expect merge_other_guest_forced 0 "warning: guest 0's trace guest.dat was recorded on host '\(none\)'.*merging anyway \(--force\)"
	grep -q '^g0 v' forced.txt && ok merge_other_guest_forced_has_guest || not_ok merge_other_guest_forced_has_guest
	run -- merge none.hgc host.dat guest.dat -o same.txt
	expect merge_identity_matches 0
	grep -q 'no identity' <<<"$err" && not_ok merge_identity_matches_no_note "$err" || ok merge_identity_matches_no_note
	# Guest 1's identity says nothing about guest 0.
	run -- merge guest1.hgc host.dat guest.dat -o g1.txt
	expect merge_identity_of_other_id_unchecked 0 'guest 0: no identity recorded'
	run -- merge none.hgc guest.dat host.dat -q -o swapped.txt
	expect merge_identity_swapped_refused 6 "guest.dat is a guest's trace"
else
	not_ok merge_identity_files "python3 could not write them"
fi
run -- merge merge.hgc host.dat guest.dat -o plain.txt
expect merge_no_identity_noted 0 'merge.hgc: guest 0: no identity recorded.*cannot check'
[ "$(grep -c 'no identity' <<<"$err")" = 1 ] && ok merge_no_identity_noted_once || not_ok merge_no_identity_noted_once
run -- merge merge.hgc host.dat guest.dat -q -o plain.txt
grep -q 'identity recorded' <<<"$err" && not_ok merge_no_identity_quiet "$err" || ok merge_no_identity_quiet

# A guest recorded without an agent (record --guest vm=PID): the real
# recording with the agent's sections taken out (GUEST_INFO, its records,
# probes, SEGMENTS, CPU map, identity), GUEST_VM kept, END's count redone.
if python3 - merge.hgc noagent.hgc <<'EOF2'
import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
pos = struct.unpack_from('<I', d, 12)[0]
out, n = bytearray(d[:pos]), 0
def section(t, flags, payload):
    h = struct.pack('<IIQI', t, flags, len(payload), zlib.crc32(payload))
    return h + struct.pack('<I', zlib.crc32(h)) + payload + bytes(-len(payload) % 8)
while True:
    t, flags, length = struct.unpack_from('<IIQ', d, pos)
    size = 24 + length + (-length % 8)
    if t == 6:
        out += section(6, flags, struct.pack('<Q', n))
        break
    if t not in (3, 4, 7, 9, 10, 11):
        out += d[pos:pos + size]
        n += 1
    pos += size
open(sys.argv[2], 'wb').write(out)
EOF2
then
	# guest.dat is on 'local' and has no pairmark markers: no mapping, said.
	run -- merge noagent.hgc host.dat guest.dat -o noagent.txt
	expect merge_agentless_local_said 0 \
		"guest 0 was recorded without an agent \(VM 201\): its 'local' clock maps only through marker pairings.*unmapped"
	grep -Eq 'guest 0 512 \(512 unmapped' <<<"$err" && ok merge_agentless_local_unmapped ||
		not_ok merge_agentless_local_unmapped "$err"
	grep -q 'kvm-exact}' noagent.txt && not_ok merge_agentless_nothing_guessed ||
		ok merge_agentless_nothing_guessed
	run -- convert noagent.hgc --clock local 1000
	expect convert_agentless_local 0
	grep -q "none (guest 0 was recorded without an agent" out.txt && ok convert_agentless_local_reason ||
		not_ok convert_agentless_local_reason "$(cat out.txt)"
	# x86-tsc: the host's records alone, the same as with the agent's data.
	run noagent.out -- convert noagent.hgc --clock x86-tsc 300000000000 310000000000
	expect convert_agentless_tsc 0
	run agent.out -- convert merge.hgc --clock x86-tsc 300000000000 310000000000
	grep -q ' kvm-exact +-0 ns' noagent.out && cmp -s noagent.out agent.out &&
		ok convert_agentless_tsc_exact || not_ok convert_agentless_tsc_exact "$(cat noagent.out)"
	run -- convert noagent.hgc --guest 1 --clock x86-tsc 1
	expect convert_agentless_no_such_guest 6 'no guest 1'
	# --markers: guest.dat has no pairmark markers, so nothing more maps.
	run -- convert noagent.hgc --markers guest.dat --clock local 1000
	expect convert_markers_none 0 "guest.dat: 0 marker pairings on 'local' from 0 markers"
	grep -q "none (guest 0 was recorded without an agent" out.txt && ok convert_markers_none_still_refused ||
		not_ok convert_markers_none_still_refused "$(cat out.txt)"
	run -- convert noagent.hgc --markers missing.dat 1000
	expect convert_markers_missing 1 'missing.dat'
else
	not_ok merge_agentless_files "python3 could not write them"
fi
# record --guest without an agent: the VM must be named; checked before anything is opened.
run -- record -o never.hgc --guest tcp:192.0.2.1:5,no-agent
expect record_no_agent_tcp_needs_vm 2 'without an agent the VM must be named'
run -- record -o never.hgc --guest vm=0
expect record_no_agent_bad_pid 2 'vm= wants'
[ -e never.hgc ] && not_ok record_no_agent_nothing_created || ok record_no_agent_nothing_created

# ---- 4. one clock-name parser ------------------------------------------------

for clock in local sched perf x86-tsc tsc; do
	run -- plot merge.hgc --clock $clock -o plot.svg
	expect "plot_clock_$clock" 0
	run -- convert merge.hgc --clock $clock 1000
	expect "convert_clock_$clock" 0
done
for cmd in plot convert; do
	run -- $cmd merge.hgc --clock global 1
	expect "${cmd}_clock_global_usage" 2 'local, perf or x86-tsc'
done

# ---- 5. help like git's --------------------------------------------------------

commands=$("$tool" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
[ -n "$commands" ] && ok help_lists_commands || not_ok help_lists_commands
for c in $commands; do
	a=$("$tool" help "$c" 2>&1)
	rc_a=$?
	b=$("$tool" "$c" --help 2>&1)
	if [ $rc_a -eq 0 ] && [ "$a" = "$b" ] && grep -q "^usage: hgclock $c" <<<"$a"; then
		ok "help_$c"
	else
		not_ok "help_$c" "'hgclock help $c' (exit $rc_a) differs from '$c --help'"
	fi
done
run -- help nosuch
expect help_unknown_command 2 "unknown command 'nosuch'"

# ---- 6. the documented options are the code's -----------------------------------
#
# For each command: the long options of its getopt table (user/cmd/cmd_C.c)
# all appear in 'hgclock C --help'; tools.rst's section for it holds that
# --help text verbatim; the man page's OPTIONS list names exactly them.

if [ ! -f "$top/Documentation/tools.rst" ]; then
	not_ok docs "no source tree at $top"
else
	for c in $commands; do
		src=$(grep -oE '\{ "[a-z][a-z0-9-]*", (no|required|optional)_argument' \
			"$top/user/cmd/cmd_$c.c" | sed -E 's/\{ "([^"]*)".*/--\1/' | sort -u)
		help=$("$tool" "$c" --help)
		miss=""
		for o in $src; do
			[ "$o" = --help ] && continue
			grep -Eq -- "$o([^a-z0-9-]|\$)" <<<"$help" || miss="$miss $o"
		done
		[ -z "$miss" ] && ok "help_lists_options_$c" ||
			not_ok "help_lists_options_$c" "'$c --help' lacks$miss"

		printf '%s\n' "$help" >help.txt
		if python3 - "$top/Documentation/tools.rst" help.txt <<'EOF'
import sys
doc = open(sys.argv[1]).read()
text = open(sys.argv[2]).read().rstrip('\n').split('\n')
block = '\n'.join('    ' + l if l else '' for l in text)
sys.exit(0 if '::\n\n' + block + '\n' in doc else 1)
EOF
		then
			ok "tools_rst_help_$c"
		else
			not_ok "tools_rst_help_$c" "Documentation/tools.rst lacks '$c --help' verbatim"
		fi

		page=$top/Documentation/man/hgclock-$c.rst
		if [ ! -f "$page" ]; then
			not_ok "man_options_$c" "no $page"
			continue
		fi
		man=$(awk '/^OPTIONS$/ { on = 1; next } on && /^=+$/ { next }
			on && /^[A-Z][A-Z ]+$/ { exit } on && /^\*\*-/ { print }' "$page" |
			grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
		diff=$(comm -3 <(echo "$src") <(echo "$man") | tr -d '\t' | tr '\n' ' ')
		[ -z "${diff// /}" ] && ok "man_options_$c" ||
			not_ok "man_options_$c" "$page OPTIONS and user/cmd/cmd_$c.c differ in: $diff"
	done
fi

# ---- application event files (merge --app / --guest-app) -------------------------
mkapp app-host.hgev 2 hgclock-vm 20
run -- merge merge.hgc host.dat guest.dat --app app-host.hgev -o app.txt
expect merge_app_cut_short_said 0 'app-host.hgev: its last 20 bytes are a record cut short'
if [ "$(grep -c ' app:req ' app.txt)" = 2 ] && grep -q '^host  *cliapp-77 *\[000\] .*app:req  *\[end\] one done$' app.txt; then
	ok merge_app_lines
else
	not_ok merge_app_lines "$(grep app: app.txt | head -3 | tr '\n' '|')"
fi
mkapp app-guest.hgev 2 hgclock-vm 0
run -- "${merge_in[@]}" --guest-app 0=app-guest.hgev -o app.txt
expect merge_guest_app_from_host_refused 6 "app-guest.hgev: the application ran on the correlation file's host 'hgclock-vm'"
mkapp app-perf.hgev 1 hgclock-vm 0
run -- "${merge_in[@]}" --app app-perf.hgev -o app.txt
expect merge_app_perf_clock_accepted 0
if [ "$(grep -c ' app:req ' app.txt)" = 2 ]; then ok merge_app_perf_clock_lines; else not_ok merge_app_perf_clock_lines "$(grep -c app: app.txt) app lines"; fi
# --perf (perf_in.c, merge.rst "perf samples"): perf missing and perf
# failing are said with exit 6; a real perf.data gives its samples, and
# the event file in $TMPDIR had no name: nothing left there.
if [ -f "$data/perf-sample.data" ]; then cp "$data/perf-sample.data" .; else xz -dc "$data/perf-sample.data.xz" >perf-sample.data; fi
mkdir -p perftmp
printf '#!/bin/sh\necho "perf: cannot read it" >&2\nexit 2\n' >perf-fails
chmod +x perf-fails
export TMPDIR=$tmp/perftmp
HGCLOCK_PERF=/nonexistent/perf
export HGCLOCK_PERF
run -- "${merge_in[@]}" --perf perf-sample.data --force -o perf.txt
expect merge_perf_missing 6 "perf-sample.data: cannot run '/nonexistent/perf script': No such file"
HGCLOCK_PERF=$tmp/perf-fails
run -- "${merge_in[@]}" --perf perf-sample.data --force -o perf.txt
expect merge_perf_fails 6 "'$tmp/perf-fails script' failed \(exit 2\)"
unset HGCLOCK_PERF
if command -v perf >/dev/null; then
	run -- "${merge_in[@]}" --perf perf-sample.data --force -o perf.txt
	expect merge_perf_data 0
	if [ "$(grep -c ' perf:cpu-clock ' perf.txt)" -gt 0 ]; then ok merge_perf_data_lines; else not_ok merge_perf_data_lines "no perf:cpu-clock line"; fi
else
	skip merge_perf_data "no perf (tools/deps.sh installs linux-perf)"
	skip merge_perf_data_lines "no perf"
fi
if [ -z "$(ls -A perftmp)" ]; then ok merge_perf_no_temp_left; else not_ok merge_perf_no_temp_left "$(ls -A perftmp)"; fi
unset TMPDIR

# Several workers each open the event file; one reads it, the others take
# what it found (merge.c's hgm_checked): the same lines, the same warning.
run -- merge merge.hgc host.dat guest.dat --app app-host.hgev --threads 1 -o app-t1.txt
run -- merge merge.hgc host.dat guest.dat --app app-host.hgev --threads 3 -o app-t3.txt
expect merge_app_threads_cut_short_said 0 'app-host.hgev: its last 20 bytes are a record cut short'
if [ -s app-t1.txt ] && cmp -s app-t1.txt app-t3.txt && [ "$(grep -c ' app:req ' app-t3.txt)" = 2 ]; then
	ok merge_app_threads_same_lines
else
	not_ok merge_app_threads_same_lines "$(diff app-t1.txt app-t3.txt | head -3 | tr '\n' '|')"
fi
printf 'not events\n' >notapp.txt
run -- "${merge_in[@]}" --app notapp.txt -o app.txt
expect merge_app_not_an_event_file 6 'notapp.txt: not an hgclock application event file'

# ---- filters: --from/--to, --guests, --vcpus, --events ----------------------
# The reference: the whole merge.  A filtered merge prints exactly the
# lines of the whole one that the filter keeps, in the same order.
run -- "${merge_in[@]}" -o all.txt
# evtime/evname LINE...: the timestamp and the event name of each line.
fields() { awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
	print substr($i, 1, length($i) - 1), $(i + 1); break } }' "$@"; }
# same_as NAME FILE AWK-CONDITION: FILE holds the lines of all.txt that
# satisfy the condition (on $t, the time, $e, the event, $0 the line), in order.
same_as() {
	local want
	want=$(awk '{ t = ""; e = ""; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {
		t = substr($i, 1, length($i) - 1); e = $(i + 1); break } }
		'"$3"' { print }' all.txt)
	if [ -n "$want" ] && [ "$want" = "$(cat "$2")" ]; then
		ok "$1"
	else
		not_ok "$1" "$(wc -l <"$2") lines, want $(printf '%s\n' "$want" | grep -c .)"
	fi
}
from=$(fields all.txt | awk 'NR == 20000 { print $1 }')
to=$(fields all.txt | awk 'NR == 30000 { print $1 }')
for threads in 1 3; do
	run -- merge merge.hgc host.dat guest.dat --threads $threads --from "$from" --to "$to" -o win.txt
	expect "filter_window_t$threads" 0 "events shown \([1-9][0-9]* more read and left out by the filter\)"
	same_as "filter_window_t${threads}_lines" win.txt "t + 0 >= $from && t + 0 <= $to"
done
# The merge stops reading soon after --to: far fewer left out than after it.
left=$(sed -n 's/.*(\([0-9]*\) more read.*/\1/p' <<<"$err")
after=$(fields all.txt | awk -v to="$to" '$1 + 0 > to + 0' | wc -l)
[ -n "$left" ] && [ "$left" -lt $((20000 + after / 2)) ] && ok filter_to_stops_reading ||
	not_ok filter_to_stops_reading "$left left out, $after events after --to"
run -- "${merge_in[@]}" --guests 0 -o g0.txt
expect filter_guests_guest_only 0
same_as filter_guests_guest_only_lines g0.txt '$1 == "g0"'
run -- "${merge_in[@]}" --guests host -o host.txt
same_as filter_guests_host_only_lines host.txt '$1 == "host"'
run -- "${merge_in[@]}" --guests host,0 --vcpus 1 -o v1.txt
same_as filter_vcpus_lines v1.txt '$1 == "host" || ($1 == "g0" && $2 == "v1")'
run -- "${merge_in[@]}" --guests 0 --vcpus 1 --to "$to" --json v1.json -o v1w.txt
if python3 -c 'import json, sys; json.load(open(sys.argv[1]))' v1.json 2>/dev/null &&
   [ -s v1w.txt ] && [ "$(grep -c '"ph":"i"' v1.json)" = "$(wc -l <v1w.txt)" ]; then
	ok filter_json_same_events
else
	not_ok filter_json_same_events "$(grep -c '"ph":"i"' v1.json) JSON events, $(wc -l <v1w.txt) lines"
fi
run -- "${merge_in[@]}" --events kvm:kvm_entry,sched_wakeup -o ev.txt
same_as filter_events_lines ev.txt 'e == "kvm_entry" || e == "sched_wakeup"'
run -- "${merge_in[@]}" --events sched --events 'kvm_ex*' -o ev2.txt
same_as filter_events_system_glob_lines ev2.txt 'e ~ /^sched_/ || e == "kvm_exit"'
run -- "${merge_in[@]}" --events sched/sched_switch --guests 0 --to "$to" -o ev3.txt
same_as filter_combined_lines ev3.txt '$1 == "g0" && e == "sched_switch" && t + 0 <= '"$to"
run -- "${merge_in[@]}" --guests 7 -o none.txt
expect filter_unknown_guest 6 '--guests: the correlation file has no guest 7'
run -- "${merge_in[@]}" --from "$to" --to "$from" -o none.txt
expect filter_from_after_to 6 '--from is after --to'
run -- "${merge_in[@]}" --from 12s -o none.txt
expect filter_bad_time 2 "'12s' is not a time"
run -- "${merge_in[@]}" --from 1.1234567891 -o none.txt
expect filter_time_ten_decimals 2 'at most 9 decimals'
run -- "${merge_in[@]}" --vcpus 3-1 -o none.txt
expect filter_bad_range 2 "vCPU '3-1'"
run -- "${merge_in[@]}" --vcpus host -o none.txt
expect filter_host_not_vcpu 2 "'host' is not a vCPU"
run -- "${merge_in[@]}" --events a:b:c -o none.txt
expect filter_bad_event 2 'one separator'

echo "1..$n"
[ "$failed" -eq 0 ]
