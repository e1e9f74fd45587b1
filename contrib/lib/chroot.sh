# shellcheck shell=bash
# Sourced by contrib/stack13.sh and contrib/package.sh: what a command run
# chrooted into a Debian root needs mounted there. Call it only inside a mount
# namespace of its own (unshare --mount --propagation private): the mounts then
# disappear with the namespace, and nothing is unmounted by hand (an unmount
# could propagate to the host's mounts).

# chroot_mounts ROOT: /proc, /sys, /dev and a fresh tmpfs /run inside ROOT. The
# root is bound onto itself first: "ip netns exec" remounts "/" as a slave,
# which fails on a directory that is not a mount point.
chroot_mounts() {
  local root=$1
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=755 tmpfs "$root/run"
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}
