#!/bin/sh
# Builds the VM test guest's initramfs (newc cpio, gzip).
#   mkinitramfs.sh BUILD KERNEL_TREE BUSYBOX OUT
# BUILD        the build directory (memgrantd, memgrantctl, tests/vm/pin, tests/vm/trace)
# KERNEL_TREE  the extracted linux-image package (lib/modules/VERSION/...)
# BUSYBOX      a static busybox binary
# OUT          the initramfs to write
# The programs' shared libraries are found with ldd and copied with the
# dynamic loader, at the paths ldd prints; libcurl and libcrypto, which they
# load with dlopen(), with theirs.
# Environment (the libvirt test, tests/vm/libvirt.sh, uses both):
# MKINITRAMFS_EXTRA_MODULES  more modules under drivers/ (e.g. "virtio/virtio_mem"),
#                            loaded by init after the virtio ones, in this order
# MKINITRAMFS_CONFIG         the agent's memgrant.yaml instead of the built-in one
set -eu
BUILD=$1 KTREE=$2 BUSYBOX=$3 OUT=$4
HERE=$(cd "$(dirname "$0")" && pwd)
R=$(mktemp -d "${TMPDIR:-/tmp}/memgrant-vm-root.XXXXXX")
# mktemp makes it 0700; it becomes the guest's /, which the agent must traverse after giving up root
chmod 0755 "$R"
trap 'rm -rf "$R"' EXIT

mkdir -p "$R/bin" "$R/sbin" "$R/usr/bin" "$R/usr/sbin" "$R/etc/memgrant" "$R/proc" "$R/sys" \
	"$R/dev" "$R/run" "$R/tmp" "$R/modules"
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do
	[ "$a" = busybox ] || ln -sf /bin/busybox "$R/bin/$a"
done

copy_libs() { # ELF: the shared libraries ldd finds for it, at the paths ldd prints
	ldd "$1" | awk '/=> \//{print $3} /^\t\//{print $1}' | while read -r lib; do
		[ -e "$R$lib" ] && continue
		mkdir -p "$R$(dirname "$lib")"
		cp -L "$lib" "$R$lib"
	done
}
copy_with_libs() { # PROGRAM DEST
	cp "$1" "$R$2"
	copy_libs "$1"
}
copy_with_libs "$BUILD/memgrantd" /usr/sbin/memgrantd
copy_with_libs "$BUILD/memgrant-helper" /usr/sbin/memgrant-helper
copy_with_libs "$BUILD/memgrantctl" /usr/bin/memgrantctl
# what the programs load with dlopen() when a command needs it, which ldd does
# not see: libcurl (memgrantctl talking to memgrantd, HTTPS, webhooks) and libcrypto
for so in libcurl.so.4 libcrypto.so.3; do
	lib=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')
	[ -n "$lib" ] || { echo "mkinitramfs: no $so on this machine (apt-get install libcurl4 libssl3)" >&2; exit 1; }
	mkdir -p "$R$(dirname "$lib")"
	cp -L "$lib" "$R$lib"
	copy_libs "$lib"
done
[ -x "$BUILD/tests/vm/pin" ] && cp "$BUILD/tests/vm/pin" "$R/usr/bin/pin"
[ -x "$BUILD/tests/vm/trace" ] && cp "$BUILD/tests/vm/trace" "$R/usr/bin/trace"

kver=$(ls "$KTREE/lib/modules" | head -n 1)
kdir=$KTREE/lib/modules/$kver/kernel/drivers
for m in virtio/virtio_ring virtio/virtio virtio/virtio_pci_modern_dev virtio/virtio_pci_legacy_dev \
	virtio/virtio_pci char/virtio_console; do
	name=$(basename "$m")
	if [ -f "$kdir/$m.ko" ]; then
		cp "$kdir/$m.ko" "$R/modules/$name.ko"
	elif [ -f "$kdir/$m.ko.xz" ]; then
		xz -dc "$kdir/$m.ko.xz" > "$R/modules/$name.ko"
	else
		echo "mkinitramfs: module $m not found under $kdir" >&2
		exit 1
	fi
done
: > "$R/modules/extra.list"
for m in ${MKINITRAMFS_EXTRA_MODULES:-}; do
	name=$(basename "$m")
	if [ -f "$kdir/$m.ko" ]; then
		cp "$kdir/$m.ko" "$R/modules/$name.ko"
	elif [ -f "$kdir/$m.ko.xz" ]; then
		xz -dc "$kdir/$m.ko.xz" > "$R/modules/$name.ko"
	else
		echo "mkinitramfs: extra module $m not found under $kdir" >&2
		exit 1
	fi
	echo "$name" >> "$R/modules/extra.list"
done

cp "$HERE/init" "$R/init"
chmod 0755 "$R/init"
# memgrant: the user the agent drops to (the packages' sysusers.d creates it)
printf 'root:x:0:0:root:/:/bin/sh\nmemgrant:x:990:990:memgrant:/:/bin/false\n' > "$R/etc/passwd"
printf 'root:x:0:\nmemgrant:x:990:\n' > "$R/etc/group"
echo memgrant-vm > "$R/etc/hostname"
cat > "$R/etc/memgrant/memgrant.yaml" <<'YAML'
# The VM test guest: the sysfs backend on this guest's own /sys (inside
# QEMU), grants over the virtio-serial port, state in tmpfs.
agent:
  id: memgrant-vm
  state_dir: /var/lib/memgrant
  api_socket: /run/memgrant/api.sock
  api_group: memgrant
  log_level: debug
backend:
  type: sysfs
  root: /
  own_onlining: true
policy:
  revoke_budget: 5s
providers:
  channel:
    path: /dev/virtio-ports/org.memgrant.0
YAML

if [ -n "${MKINITRAMFS_CONFIG:-}" ]; then
	cp "$MKINITRAMFS_CONFIG" "$R/etc/memgrant/memgrant.yaml"
fi

(cd "$R" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 > "$OUT"
