#!/usr/bin/env bash
# Makes localhost/debian:bookworm without a registry: debootstrap (minbase) from the host's Debian mirror, the
# host's extra CA certificates added (outbound HTTPS may be re-signed by a local CA; harmless where it is not),
# then `podman import`. Kept if the image already exists.
set -euo pipefail
image=${1:-localhost/debian:bookworm}
if podman image exists "$image"; then echo "base image $image: cached"; exit 0; fi
mirror=$(sed -n 's/^URIs: *//p; s/^deb \(\[[^]]*\] \)\?\(http[^ ]*\) bookworm .*/\2/p' \
  /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/rbp-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" >/dev/null
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | podman import --change 'CMD ["bash"]' - "$image" >/dev/null
echo "base image $image: built from $mirror"
