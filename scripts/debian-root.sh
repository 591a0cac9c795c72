#!/usr/bin/env bash
# Throwaway Debian roots for the install tests and the portable build, without
# containers and without touching the host: debootstrap writes only into the
# root, and `run` mounts /proc, /dev/pts (with /dev/ptmx), /dev/shm, /sys and the
# cgroup tree in a private mount namespace that disappears with the command.
#
#   scripts/debian-root.sh make SUITE DIR [PACKAGE...]
#       A fresh root of SUITE (bullseye, bookworm, ...) with PACKAGE... in DIR
#       (replaced). The first time for a suite it runs debootstrap
#       --variant=minbase from the mirror and keeps the result as a tarball
#       next to DIR (DIR/../<suite>-minbase.tar); PACKAGE... are installed into
#       a copy with apt-get, and that root is kept as DIR/../<suite>-<hash>.tar.
#       Later calls unpack the tarball (seconds, offline).
#   scripts/debian-root.sh prefetch CACHE-DIR SUITE...
#       Only the minbase tarballs, in CACHE-DIR: CI makes them while the
#       compiler runs, for the roots that `make test-install` makes there.
#   scripts/debian-root.sh run DIR COMMAND [ARG...]
#       Runs COMMAND inside the root (as root, HOME=/root, a plain PATH).
#
# Needs root (chroot, debootstrap, unshare) and the debootstrap package.
# AIR_DEBIAN_MIRROR overrides the mirror; the default is the host's first
# deb.debian.org-style URI in /etc/apt/sources.list*, else deb.debian.org.
set -euo pipefail

die() {
  echo "debian-root: $*" >&2
  exit 1
}

mirror() {
  if [[ -n ${AIR_DEBIAN_MIRROR:-} ]]; then
    echo "$AIR_DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' ') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

# minbase_tarball SUITE CACHE-DIR: prints the path of SUITE's bare minbase
# root as a tarball in CACHE-DIR, running debootstrap the first time. Every
# root of the suite starts from it. Two callers may race: each builds in a
# directory of its own, and the tarball appears whole (a rename).
minbase_tarball() {
  local suite=$1 tarball="$2/$1-minbase.tar"
  if [[ ! -f $tarball ]]; then
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    local tmp="$tarball.$$.root"
    rm -rf "$tmp"
    echo "debian-root: debootstrap $suite from $(mirror) (cached as $tarball)" >&2
    debootstrap --variant=minbase "$suite" "$tmp" "$(mirror)" >"$tmp.log" 2>&1 ||
      die "debootstrap failed; see $tmp.log"
    rm -f "$tmp.log"
    # Package lists and downloaded .debs are not needed to install local files.
    rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_Packages
    tar -C "$tmp" -cf "$tarball.$$" . && mv "$tarball.$$" "$tarball"
    rm -rf "$tmp"
  fi
  echo "$tarball"
}

make_root() {
  local suite=$1 dir=$2
  shift 2
  local packages
  packages=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
  mkdir -p "$(dirname "$dir")"
  local cache_dir cache
  cache_dir=$(cd "$(dirname "$dir")" && pwd)
  if [[ -z $packages ]]; then
    cache=$(minbase_tarball "$suite" "$cache_dir")
  else
    cache="$cache_dir/$suite-$(printf '%s %s' "$suite" "$packages" | sha256sum | cut -c1-12).tar"
  fi
  rm -rf "$dir"
  if [[ ! -f $cache ]]; then
    # The packages go into a copy of the minbase root with apt, as debootstrap's
    # --include would put them (no recommends), and the result is cached too.
    local base tmp="$dir.building"
    base=$(minbase_tarball "$suite" "$cache_dir")
    rm -rf "$tmp"
    mkdir -p "$tmp"
    tar -C "$tmp" -xf "$base"
    echo force-unsafe-io >"$tmp/etc/dpkg/dpkg.cfg.d/air-unsafe-io"
    echo "debian-root: $suite with $packages (cached as $cache)" >&2
    run_in_root "$tmp" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "$@" && apt-get clean && rm -rf /var/lib/apt/lists/*' \
      sh "$@" >"$tmp.log" 2>&1 || die "installing $packages failed; see $tmp.log"
    rm -f "$tmp.log" "$tmp/etc/dpkg/dpkg.cfg.d/air-unsafe-io"
    tar -C "$tmp" -cf "$cache.part" . && mv "$cache.part" "$cache"
    mv "$tmp" "$dir"
  else
    mkdir -p "$dir"
    tar -C "$dir" -xf "$cache"
  fi
  # A throwaway root needs no fsync after each file: packages installed in it
  # (apt-get in the tests) unpack several times faster.
  echo force-unsafe-io >"$dir/etc/dpkg/dpkg.cfg.d/air-unsafe-io"
}

run_in_root() {
  local dir=$1
  shift
  [[ -x $dir/bin/sh ]] || die "$dir is not a Debian root"
  # --fork --pid: the command is PID 1 of its own namespace, so nothing it
  # starts outlives it; --mount: the mounts below are private and vanish with it.
  # /dev/ptmx is bound to the new devpts instance's, so a pseudo-terminal
  # opened in the root has its /dev/pts/N there; /sys and the cgroup tree are
  # the host's, as on a machine, for air-run's containment and its tests.
  [[ -e $dir/dev/ptmx ]] || touch "$dir/dev/ptmx"
  mkdir -p "$dir/sys"
  unshare --mount --pid --fork --mount-proc="$dir/proc" -- \
    sh -c 'mount -t tmpfs -o size=256m tmpfs "$0/dev/shm" &&
           mount -t devpts -o newinstance,ptmxmode=0666 devpts "$0/dev/pts" &&
           mount --bind "$0/dev/pts/ptmx" "$0/dev/ptmx" &&
           mount -t sysfs sysfs "$0/sys" &&
           { ! [ -d /sys/fs/cgroup ] || mount --rbind /sys/fs/cgroup "$0/sys/fs/cgroup"; } &&
           exec chroot "$0" "$@"' "$dir" \
    env -i HOME=/root TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "$@"
}

[[ $(id -u) == 0 ]] || die "needs root (debootstrap and chroot)"
case ${1:-} in
  make) shift; (($# >= 2)) || die "usage: debian-root.sh make SUITE DIR [PACKAGE...]"; make_root "$@" ;;
  run) shift; (($# >= 2)) || die "usage: debian-root.sh run DIR COMMAND [ARG...]"; run_in_root "$@" ;;
  prefetch)
    shift
    (($# >= 2)) || die "usage: debian-root.sh prefetch CACHE-DIR SUITE..."
    mkdir -p "$1"
    for suite in "${@:2}"; do minbase_tarball "$suite" "$(cd "$1" && pwd)" >/dev/null; done
    ;;
  *) die "usage: debian-root.sh make SUITE DIR [PACKAGE...] | run DIR COMMAND [ARG...] | prefetch CACHE-DIR SUITE..." ;;
esac
