#!/bin/bash
# Builds hgclock.ko against one kernel tree, warning-free (W=1).
#
#   tools/build-module.sh KDIR OUTDIR
#
# Kbuild builds external modules in the source directory, so each kernel
# gets its own copy of the module sources under OUTDIR/<kernelrelease>/:
# builds for several kernels never overwrite each other.  Prints the path
# of the built hgclock.ko on its last line.
set -euo pipefail

kdir=${1:-}
outdir=${2:-build/module}
top=$(cd "$(dirname "$0")/.." && pwd)

if [ -z "$kdir" ] || [ ! -f "$kdir/Makefile" ]; then
	echo "build-module: no kernel build tree '${kdir}': install linux-headers (tools/deps.sh) or pass KDIR=" >&2
	exit 1
fi
# Debian's header trees are named after the release they belong to.
case $(basename "$kdir") in
linux-headers-*) kver=$(basename "$kdir" | sed 's/^linux-headers-//') ;;
*) kver=$(make -s -C "$kdir" kernelrelease 2>/dev/null || basename "$kdir") ;;
esac
dest="$outdir/$kver"
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

# Refresh the copy: only the files Kbuild needs.
rm -rf "$dest/module" "$dest/include"
cp -r "$top/Kbuild" "$top/module" "$dest/"
mkdir -p "$dest/include"
cp -r "$top/include/uapi" "$dest/include/"

log="$dest/build.log"
if ! make -C "$kdir" M="$dest" W=1 modules >"$log" 2>&1; then
	cat "$log" >&2
	echo "build-module: build against $kdir failed" >&2
	exit 1
fi
# The compiler's and Kbuild's warnings; not make's own about its job
# server ("make[1]: warning: jobserver unavailable", under a parallel
# make that did not hand it down), which says nothing of the code.
if grep -E 'warning:|error:' "$log" | grep -vE '^make(\[[0-9]+\])?: warning: jobserver' >&2; then
	echo "build-module: warnings building against $kdir (W=1 must be clean)" >&2
	exit 1
fi
echo "$dest/hgclock.ko"
