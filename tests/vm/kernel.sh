# Sourced by tests/vm/run.sh and tests/vm/libvirt.sh: the guest's kernel and
# busybox.  The Debian kernel that linux-image-amd64 points at and
# busybox-static are downloaded once into $WORK/debs (never installed); only
# the kernel image and the virtio modules are unpacked (the whole package is
# 400M).  Sets VMLINUZ, KDEB and BDEB; calls the caller's skip() with the
# reason when a package cannot be had.
vm_fetch_kernel() {
	mkdir -p "$WORK/debs"
	if ! ls "$WORK"/debs/linux-image-*.deb >/dev/null 2>&1 || ! ls "$WORK"/debs/busybox-static_*.deb >/dev/null 2>&1; then
		kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n 1)
		[ -n "$kpkg" ] || skip "apt-cache knows no linux-image-amd64 (run apt-get update)"
		(cd "$WORK/debs" && apt-get download "$kpkg" busybox-static) > "$WORK/download.log" 2>&1 ||
			skip "apt-get download $kpkg busybox-static failed: $(tail -n 2 "$WORK/download.log")"
	fi
	KDEB=$(ls "$WORK"/debs/linux-image-*.deb | tail -n 1)
	BDEB=$(ls "$WORK"/debs/busybox-static_*.deb | tail -n 1)
	if [ ! -f "$WORK/kernel.stamp" ] || [ "$(cat "$WORK/kernel.stamp")" != "$KDEB $BDEB" ]; then
		rm -rf "$WORK/kernel" "$WORK/busybox"
		mkdir -p "$WORK/kernel" &&
			dpkg-deb --fsys-tarfile "$KDEB" | tar -x -C "$WORK/kernel" --wildcards './boot/vmlinuz-*' \
				'./lib/modules/*/kernel/drivers/virtio/*' './lib/modules/*/kernel/drivers/char/virtio_console.ko*' &&
			dpkg-deb -x "$BDEB" "$WORK/busybox" ||
			skip "cannot extract $KDEB / $BDEB"
		echo "$KDEB $BDEB" > "$WORK/kernel.stamp"
	fi
	VMLINUZ=$(ls "$WORK"/kernel/boot/vmlinuz-* | head -n 1)
	[ -f "$VMLINUZ" ] || skip "no vmlinuz in $KDEB"
}
