#!/usr/bin/env bash
# Installs the Debian packages the benchmarks need, only those missing:
#   nginx         (`atoll bench comm`) the two tiers of the request/response
#                 application (a reverse proxy and a back end that gzips
#                 every response), and the proxy in front of the streaming
#                 server
#   redis-server  (`atoll bench slo`) the latency-critical service, started
#                 by the benchmark on a free loopback port with `--save ''`
#   mariadb-server (`atoll bench slo --scenario tiers`) the auction's
#                 database: `mariadbd` started by the benchmark from its own
#                 datadir (`mariadb-install-db`), on a unix socket in its temp
#                 dir, `--skip-networking --skip-grant-tables`
# The benchmark's own load generators are atoll workers (no package).
# Installing a package does not configure or start anything for the
# benchmarks: they run their servers from their own temp dirs (`nginx -p DIR
# -c FILE`, `daemon off`; `redis-server --dir DIR --port P`) on free loopback
# ports. Whether Debian's package starts its default service is up to the
# machine's policy-rc.d; the benchmarks do not use or touch it.
set -euo pipefail

# program -> package
declare -A need=([nginx]=nginx [redis-server]=redis-server [mariadbd]=mariadb-server)

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
