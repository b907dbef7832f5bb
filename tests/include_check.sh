#!/bin/sh
# The layout's rules (docs/design.md), checked on the source tree:
# - the engine's headers (agent/*.h) and its parts (agent/*.c but main),
#   the kernel side (hotplug/) and the configuration (config/) include
#   nothing from the adapters (providers/);
# - an adapter includes nothing of another adapter: the adapters are
#   providers/NAME.{c,h} and NAME_PART.{c,h} (api, https, channel, pressure) and the folders
#   providers/hooks/ (exec hooks and webhooks) and providers/host/;
# - no C file outside tests/ is longer than MAX_LINES lines.
# Run from the top of the tree (make check does).
set -u
MAX_LINES=1000
# Being split in other branches; remove each path once its split is merged.
EXEMPT=""
bad=0

complain() {
	echo "include_check: $*"
	bad=1
}

# The adapter a path belongs to ("" when none).
adapter_of() {
	case $1 in
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

for f in agent/*.h agent/*.c hotplug/*.h hotplug/*.c config/*.h config/*.c; do
	[ "$f" = agent/memgrantd.c ] && continue # main wires the adapters to the engine
	for inc in $(includes "$f"); do
		case $(resolve "$f" "$inc") in
		providers/*) complain "$f includes $inc: the engine, hotplug/ and config/ include no adapter" ;;
		esac
	done
done

for f in $(find providers -name '*.[ch]' | sort); do
	mine=$(adapter_of "$f")
	for inc in $(includes "$f"); do
		target=$(resolve "$f" "$inc")
		theirs=$(adapter_of "$target")
		if [ -n "$theirs" ] && [ "$theirs" != "$mine" ]; then
			complain "$f includes $inc: adapter $mine includes adapter $theirs"
		fi
	done
done

for f in $(find . \( -path ./tests -o -path './build*' -o -path ./.git \) -prune -o -name '*.c' -print | sed 's|^\./||' | sort); do
	n=$(wc -l < "$f")
	[ "$n" -le "$MAX_LINES" ] && continue
	case " $EXEMPT " in
	*" $f "*) echo "include_check: $f: $n lines (exempt while it is split elsewhere)" ;;
	*) complain "$f: $n lines, more than $MAX_LINES" ;;
	esac
done

[ "$bad" -eq 0 ] && echo "include_check: layout rules hold"
exit "$bad"
