# railforge stateless node: initramfs-tools boot script, selected with `boot=railforge` on the kernel command line.
# Brings up the boot NIC (initramfs-tools' configure_networking: the NIC named by BOOTIF=01-<mac>, DHCP, or ip=),
# fetches the root file system, a squashfs, from railforge.image=<URL> into RAM, and mounts it read-only under a
# tmpfs overlay as the root: every boot starts from the image and nothing the node writes survives a reboot.
# Installed as /etc/initramfs-tools/scripts/railforge by `railforge boot image`; init sources it and calls mountroot.

railforge_arg() {
	for x in $(cat /proc/cmdline); do
		case "$x" in "$1"=*) echo "${x#*=}" ;; esac
	done
}

mountroot() {
	url=$(railforge_arg railforge.image)
	[ -n "$url" ] || panic "railforge: no railforge.image=<URL of the squashfs> on the kernel command line"
	for m in squashfs overlay loop; do modprobe -q "$m"; done
	wait_for_udev 10
	configure_networking
	base=/run/railforge
	mkdir -p "$base/image" "$base/lower" "$base/rw"
	mount -t tmpfs -o mode=0700 tmpfs "$base/image"
	n=0
	log_begin_msg "railforge: fetching $url"
	until busybox wget -q -O "$base/image/filesystem.squashfs" "$url"; do
		n=$((n + 1))
		[ "$n" -lt 10 ] || panic "railforge: cannot fetch $url"
		sleep 3
	done
	log_end_msg
	loop=$(losetup -f) && losetup -r "$loop" "$base/image/filesystem.squashfs" || panic "railforge: no loop device"
	mount -t squashfs -o ro "$loop" "$base/lower" || panic "railforge: $url is not a squashfs this kernel reads"
	mount -t tmpfs -o mode=0755 tmpfs "$base/rw"
	mkdir -p "$base/rw/upper" "$base/rw/work"
	mount -t overlay -o "lowerdir=$base/lower,upperdir=$base/rw/upper,workdir=$base/rw/work" overlay "${rootmnt:?}" \
		|| panic "railforge: cannot mount the overlay root"
	echo "railforge: root is $url (squashfs in RAM) under a tmpfs overlay"
}
