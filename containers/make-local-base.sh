#!/usr/bin/env bash
# Build a tiny base image from this host's own shared libraries, for hosts that reach no registry.
#
#   containers/make-local-base.sh [--tag pikeh-base:local] [--engine docker|podman] [--python PYTHON] [VENV...]
#
# The image holds /bin/sh and the system libraries that PYTHON (its interpreter and its compiled
# standard-library modules) and the compiled extensions in each VENV (torch, numpy...) load, found
# with ldd, plus the C++ runtime PyTorch wheels expect (so an image built before the venv exists
# still runs torch); nothing else: no package manager, no Python. The worker then runs with this host's Python
# prefix and venv bind-mounted read-only (`--docker-host-python`; docs/containers.md). Files under the
# Python prefix or a venv are left out, since they are mounted at run time. Takes a few seconds.
set -euo pipefail

tag=pikeh-base:local
engine=docker
python=python3
venvs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) venvs+=("$1"); shift ;;
  esac
done

command -v ldd >/dev/null || { echo "make-local-base: ldd is missing" >&2; exit 1; }
read -r exe base_prefix <<<"$("$python" -c 'import os, sys; print(os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix))')"
dynload=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("DESTSHARED"))')
shell=$(readlink -f "$(command -v dash || command -v sh)")

rootfs=$(mktemp -d /tmp/pikeh-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT

# Every ELF object whose libraries the image must provide.
objects=("$shell" "$exe")
extra_libs=()
# What manylinux torch wheels load from the system (so a base made before the venv exists runs torch).
# awk reads the whole listing (no early exit): ldconfig writing into a closed pipe would die of SIGPIPE,
# which pipefail turns into this script's failure (exit 141 under load in CI, 2026-11-28).
for name in libstdc++.so.6 libgcc_s.so.1 libgomp.so.1 libpthread.so.0 librt.so.1 libdl.so.2 libutil.so.1 libm.so.6 libz.so.1; do
  path=$(ldconfig -p 2>/dev/null | awk -v n="$name" '!found && $1 == n && /x86-64|x86_64|AArch64|aarch64/ {print $NF; found = 1}')
  if [ -n "$path" ]; then objects+=("$path"); extra_libs+=("$path"); fi
done
while IFS= read -r -d '' so; do objects+=("$so"); done < <(find "$dynload" -name '*.so' -print0 2>/dev/null)
for venv in "${venvs[@]}"; do
  [ -d "$venv" ] || { echo "make-local-base: no such venv: $venv" >&2; exit 1; }
  while IFS= read -r -d '' so; do objects+=("$so"); done < <(find "$venv" -name '*.so*' -type f -print0)
done

# The libraries they load (ldd prints "name => /path (addr)" or "/path (addr)"), minus what is mounted.
skip_prefixes=("$base_prefix" "${venvs[@]}")
is_mounted() {
  local path=$1 prefix
  for prefix in "${skip_prefixes[@]}"; do
    [ -n "$prefix" ] && case "$path" in "$(readlink -f "$prefix")"/*|"$prefix"/*) return 0 ;; esac
  done
  return 1
}
libs=$({ printf '%s\n' "${extra_libs[@]}"
        printf '%s\0' "${objects[@]}" | xargs -0 -n 64 ldd 2>/dev/null \
          | awk '/=> \// {print $3} /^\t\// {print $1}'; } | sort -u)

for lib in $libs; do
  is_mounted "$lib" && continue
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/scratch" "$rootfs/io" "$rootfs/opt" \
         "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
chmod 1777 "$rootfs/tmp" "$rootfs/scratch"
cp -L "$shell" "$rootfs/bin/sh"
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
printf '/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n/lib64\n/usr/lib64\n' >"$rootfs/etc/ld.so.conf"
if command -v ldconfig >/dev/null; then ldconfig -r "$rootfs" 2>/dev/null || true; fi

count=$(find "$rootfs" -type f | wc -l)
size=$(du -sh "$rootfs" | cut -f1)
tar -C "$rootfs" -c . | "$engine" import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'LABEL org.opencontainers.image.title=pikeh-base org.opencontainers.image.description=host-libraries' \
  - "$tag" >/dev/null
echo "make-local-base: $tag built from $count host files ($size)"
