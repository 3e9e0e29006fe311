#!/bin/bash
# The man pages against the tool: builds them (make man: rst2man must
# not warn, groff must not warn), then for every command that
# `hgclock --help` lists there must be Documentation/man/hgclock-CMD.rst
# naming every long option that `hgclock CMD --help` prints, and no page
# for a command that does not exist.  Prints TAP lines man.*.
#
#   tools/man-check.sh [BUILD_DIR]     (the tool: BUILD_DIR/user/hgclock)
set -eu -o pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=${1:-${BUILD:-build}}
tool="$build/user/hgclock"
mkdir -p "$build/check"
log="$build/check/man.log"

# shellcheck source=tools/tap.sh
. tools/tap.sh
TAP_PREFIX=man.

if ! command -v rst2man >/dev/null; then
	tap not-ok build "rst2man not found: install python3-docutils (tools/deps.sh)"
	exit 1
fi
if make -s BUILD="$build" man >"$log" 2>&1; then
	warnings=""
	# libhgclock's section 3 pages too, but not the one-line .so links.
	for page in "$build"/man/*.1 "$build"/man/man3/*.3; do
		[ -f "$page" ] || continue
		! grep -q '^\.so ' "$page" || continue
		w=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1 || echo "groff failed")
		[ -z "$w" ] || warnings="$warnings $(basename "$page"): $w"
	done
	if [ -z "$warnings" ]; then
		tap ok build
	else
		tap not-ok build "groff warns:$warnings"
	fi
else
	sed 's/^/# /' "$log"
	tap not-ok build "make man failed (rst2man warnings stop it), log $log"
fi

[ -x "$tool" ] || { tap not-ok commands "no $tool: build it first (make user)"; exit 1; }
# "  NAME  summary" lines between "commands:" and the next blank line.
commands=$("$tool" --help | awk '/^commands:/ { on = 1; next }
	on && /^$/ { exit }
	on && /^  [a-z]/ { print $1 }')
[ -n "$commands" ] || { tap not-ok commands "'$tool --help' lists no commands"; exit 1; }

# Long options in a help text that PAGE does not mention.
missing_options() {	# HELP_TEXT PAGE
	local opt
	for opt in $(grep -o -- '--[a-z][a-z0-9-]*' <<<"$1" | sort -u); do
		grep -Eq -- "$opt([^a-z0-9-]|\$)" "$2" || printf ' %s' "$opt"
	done
}

main=Documentation/man/hgclock.rst
if [ ! -f "$main" ]; then
	tap not-ok page_hgclock "no $main"
else
	miss=$(missing_options "$("$tool" --help)" "$main")
	for c in $commands; do
		grep -q "hgclock-$c\*\*" "$main" || miss="$miss hgclock-$c(1)"
	done
	if [ -z "$miss" ]; then
		tap ok page_hgclock
	else
		tap not-ok page_hgclock "$main does not mention:$miss"
	fi
fi

for c in $commands; do
	page="Documentation/man/hgclock-$c.rst"
	if [ ! -f "$page" ]; then
		tap not-ok "page_$c" "'hgclock $c' has no man page: write $page (see Documentation/man/README)"
		continue
	fi
	if ! help=$("$tool" "$c" --help 2>&1); then
		tap not-ok "page_$c" "'hgclock $c --help' failed: $help"
		continue
	fi
	miss=$(missing_options "$help" "$page")
	if [ -z "$miss" ]; then
		tap ok "page_$c"
	else
		tap not-ok "page_$c" "$page does not document option(s) of 'hgclock $c --help':$miss"
	fi
done

stale=""
for page in Documentation/man/hgclock-*.rst; do
	c=${page#Documentation/man/hgclock-}
	c=${c%.rst}
	grep -qx -- "$c" <<<"$commands" || stale="$stale $page"
done
if [ -z "$stale" ]; then
	tap ok no_stale_pages
else
	tap not-ok no_stale_pages "pages for commands 'hgclock --help' does not list:$stale"
fi
[ "$tap_failed" -eq 0 ]
