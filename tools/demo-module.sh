#!/bin/bash
# make demo-module: from a fresh machine to real clock readings in a real
# kernel (the module alone; make demo tells the whole story).
# Installs what is missing (tools/deps.sh), builds the module for the
# newest installed kernel and the tool, boots that kernel in a VM, loads
# hgclock.ko and shows what it reads.
#
#   HGCLOCK_DEMO_KERNEL  kernel series or version to boot (default: newest)
set -u -o pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${BUILD:-build}

if [ "$(id -u)" = 0 ]; then
	tools/deps.sh || exit 1
else
	echo "demo: not root, not installing packages (run tools/deps.sh as root)" >&2
fi
make -s user || exit 1

# shellcheck source=tools/vm/lib.sh
. tools/vm/lib.sh
spec=${HGCLOCK_DEMO_KERNEL:-latest}
if ! kver=$(vm_resolve_kernel "$spec"); then
	echo "demo: no installed kernel matching '$spec': run tools/deps.sh" >&2
	exit 1
fi
ko=$(tools/build-module.sh "/usr/src/linux-headers-$kver" "$build/module" | tail -n 1) || exit 1

echo "== booting $kver under qemu (${HGCLOCK_VM_ACCEL:-tcg}), loading hgclock.ko"
tools/vm/run --kernel "$kver" --append tsc=reliable --timeout 600 -- "
	set -e
	insmod '$ko'
	echo '\$ hgclock info'
	'$build/user/hgclock' info
	echo
	echo '\$ hgclock now --all-cpus'
	'$build/user/hgclock' now --all-cpus
	echo
	echo '\$ hgclock now    # zero-syscall read of ftrace\"s local clock'
	'$build/user/hgclock' now
	echo
	echo '\$ hgclock snapshots'
	'$build/user/hgclock' snapshots
	rmmod hgclock"
