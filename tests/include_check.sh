#!/bin/sh
# The layout's rules (docs/design.md), checked on the source tree:
# - lib/wire/ (the port's typed messages and reports and their codecs)
#   includes lib/ and, of hotplug/, only the block model (hotplug/block.h,
#   hotplug/words.h): never the engine nor an adapter; the rest of lib/
#   includes only lib/ outside lib/wire/; hotplug/ (the kernel side) includes
#   only lib/ (not lib/wire/) and hotplug/;
# - the engine (agent/engine/, agent/exec/, agent/journal/) and config/
#   include no adapter (providers/, views/ included);
# - an adapter includes nothing of another adapter: the adapters are
#   providers/NAME.{c,h} and NAME_PART.{c,h} (api, https, channel, pressure)
#   and the folders providers/hooks/ and providers/host/; providers/views/
#   (the engine's views as JSON, every adapter's) includes no adapter;
# - an adapter includes of agent/ only the engine's port,
#   agent/engine/engine.h (the engine's other headers are its inside);
# - memgrant-host (providers/host/) is a program of its own: it includes no
#   agent/ header at all;
# - the engine's dependencies go one way: only engine.c (the life cycle)
#   includes the executor (agent/exec/), and the executor does not include
#   admission (the message-to-plan translation is agent/engine/plan_request.h);
# - one zone type: no enum of zones besides enum mem_zone (hotplug/block.h);
# - the previous journal's names appear nowhere (that format is not read);
# - agent/ itself holds memgrantd's main and its set-up only: at most
#   MAX_AGENT_C C files directly in it;
# - no C file outside tests/ is longer than MAX_LINES lines;
# - no build output is tracked by git (objects, archives, executables,
#   build folders).
# Run from the top of the tree (make check does).
set -u
MAX_LINES=1000
MAX_AGENT_C=8
bad=0

complain() {
	echo "include_check: $*"
	bad=1
}

# The adapter a path belongs to ("" when none; wire is nobody's).
adapter_of() {
	case $1 in
	providers/views/*) echo "" ;;
	providers/*/*) p=${1#providers/}; echo "${p%%/*}" ;;
	providers/*.c | providers/*.h) p=${1#providers/}; p=${p%.*}; echo "${p%%_*}" ;; # https_wire.c is https's
	*) echo "" ;;
	esac
}

# The repository path an #include "X" of file F names.
resolve() {
	case $2 in
	*/*) [ -e "$(dirname "$1")/$2" ] && realpath -m --relative-to=. "$(dirname "$1")/$2" || realpath -m --relative-to=. "$2" ;;
	*) realpath -m --relative-to=. "$(dirname "$1")/$2" ;;
	esac
}

# "X" and, since the build has -I., <DIR/X> for the tree's own folders
includes() {
	sed -n -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
		-e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\(\(agent\|providers\|hotplug\|config\|lib\)\/[^>]*\)>.*/\1/p' "$1"
}

[ -d agent ] && [ -d providers ] || { echo "include_check: run from the top of the tree"; exit 1; }

for f in $(find lib hotplug agent/engine agent/exec agent/journal config -name '*.[ch]' | sort); do
	for inc in $(includes "$f"); do
		target=$(resolve "$f" "$inc")
		case $f in
		lib/wire/*)
			case $target in
			lib/* | hotplug/block.h | hotplug/words.h) ;;
			*) complain "$f includes $inc: lib/wire/ includes lib/ and hotplug/block.h, hotplug/words.h only" ;;
			esac ;;
		lib/*)
			case $target in
			lib/wire/*) complain "$f includes $inc: lib/ outside lib/wire/ includes no wire type" ;;
			lib/*) ;;
			*) complain "$f includes $inc: lib/ includes only lib/" ;;
			esac ;;
		hotplug/*)
			case $target in
			lib/wire/*) complain "$f includes $inc: hotplug/ includes no wire type" ;;
			lib/* | hotplug/*) ;;
			*) complain "$f includes $inc: hotplug/ includes only lib/ and hotplug/" ;;
			esac ;;
		*)
			case $target in
			providers/*) complain "$f includes $inc: the engine and config/ include no adapter" ;;
			esac ;;
		esac
	done
done

for f in $(find providers -name '*.[ch]' | sort); do
	mine=$(adapter_of "$f")
	for inc in $(includes "$f"); do
		target=$(resolve "$f" "$inc")
		theirs=$(adapter_of "$target")
		if [ -n "$theirs" ] && [ "$theirs" != "$mine" ]; then
			case $f in
			providers/views/*) complain "$f includes $inc: the views include no adapter" ;;
			*) complain "$f includes $inc: adapter $mine includes adapter $theirs" ;;
			esac
		fi
		case $f:$target in
		providers/host/*:agent/*) complain "$f includes $inc: memgrant-host includes no agent/ header" ;;
		*:agent/engine/engine.h) ;;
		*:agent/*) complain "$f includes $inc: an adapter includes of agent/ only agent/engine/engine.h" ;;
		esac
	done
done

for f in $(find agent/engine agent/exec -name '*.[ch]' | sort); do
	for inc in $(includes "$f"); do
		target=$(resolve "$f" "$inc")
		case $f:$target in
		agent/engine/engine.c:*) ;;
		agent/engine/*:agent/exec/*) complain "$f includes $inc: only engine.c starts the executor" ;;
		agent/exec/*:agent/engine/admission.h) complain "$f includes $inc: the executor does not depend on admission" ;;
		esac
	done
done

zones=$(grep -rnE '^[[:space:]]*(typedef[[:space:]]+)?enum[[:space:]]+[a-z_]*zone[a-z_]*[[:space:]]*\{' \
	agent providers hotplug config lib --include='*.[ch]' | grep -v '^hotplug/block.h:')
[ -z "$zones" ] || complain "a second zone enum (use enum mem_zone, hotplug/block.h): $zones"

# spelled in two pieces so that this file does not name them itself
old_names="journal""_open|ilog_load""_old|journal""_old"
found=$(grep -rlE "$old_names" --exclude-dir=.git --exclude-dir='build*' . 2>/dev/null | head -n 5)
[ -z "$found" ] || complain "the previous journal's names appear in: $(echo "$found" | tr '\n' ' ')"

n=$(find agent -maxdepth 1 -name '*.c' | wc -l)
[ "$n" -le "$MAX_AGENT_C" ] || complain "agent/ holds $n C files directly, more than $MAX_AGENT_C: file them by job in its folders"

for f in $(find . \( -path ./tests -o -path './build*' -o -path ./.git \) -prune -o -name '*.c' -print | sed 's|^\./||' | sort); do
	n=$(wc -l < "$f")
	[ "$n" -le "$MAX_LINES" ] || complain "$f: $n lines, more than $MAX_LINES"
done

if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	tracked=$(git ls-files -z | tr '\0' '\n' | grep -E '(^|/)build[^/]*/|\.(o|a|so|d|gcda|gcno)$|(^|/)config\.mk$' | head -n 5)
	[ -z "$tracked" ] || complain "build output tracked by git: $(echo "$tracked" | tr '\n' ' ')"
	# executables that git tracks must be scripts, never ELF files
	for f in $(git ls-files -s | awk '$1 == "100755" {print $4}'); do
		[ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "177ELF" ] && complain "build output tracked by git: $f is an ELF file"
	done
fi

[ "$bad" -eq 0 ] && echo "include_check: layout rules hold"
exit "$bad"
