#!/bin/sh
# Prints the kernel build tree to build the module against: the running
# kernel's when it has one, else the newest installed Debian linux-headers.
# Prints nothing (and exits 1) when there is none.
set -u
run="/lib/modules/$(uname -r)/build"
if [ -d "$run" ]; then
	echo "$run"
	exit 0
fi
newest=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1)
[ -n "$newest" ] || exit 1
echo "$newest"
