#!/usr/bin/env bash
# Installs the Debian packages `atoll bench comm` needs, only those missing:
#   nginx  the two tiers of the request/response application (a reverse
#          proxy and a back end that gzips every response), and the proxy in
#          front of the streaming server
# The benchmark's own load generators are atoll workers (no package).
# Installing nginx does not configure or start anything for the benchmark:
# it runs its servers from config files in its own temp dir (`nginx -p DIR
# -c FILE`, `daemon off`) on free loopback ports. Whether Debian's package
# starts its default site is up to the machine's policy-rc.d; the benchmark
# does not use or touch it.
set -euo pipefail

# program -> package
declare -A need=([nginx]=nginx)

missing=()
for prog in "${!need[@]}"; do
  if ! command -v "$prog" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$prog" ]; then
    missing+=("${need[$prog]}")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "bench-deps: everything is installed (${!need[*]})"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "bench-deps: missing ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "bench-deps: installing ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
