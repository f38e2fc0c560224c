# shellcheck shell=sh
# atoll's .deb (packaging/build-deb.sh, passed with --deb) installs the
# binary, the unit, /etc/atoll/atoll.toml, man pages and completions, and
# the C client library (its soname symlinks, header and atoll.pc); the
# unit passes systemd-analyze verify and is not enabled by the install.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

install_debs
files=$(dpkg -L atoll) || fail "dpkg -L atoll: package not installed"
for f in /usr/bin/atoll /usr/lib/systemd/system/atoll.service /etc/atoll/atoll.toml \
    /usr/share/man/man1/atoll.1.gz /usr/share/man/man1/atoll-daemon.1.gz \
    /usr/share/bash-completion/completions/atoll /usr/include/atoll.h \
    /usr/lib/pkgconfig/atoll.pc /usr/lib/libatoll_client.so /usr/lib/libatoll_client.so.0; do
    echo "$files" | grep -qx "$f" || fail "$f is not in the package"
    [ -e "$f" ] || fail "$f is in the package but not on disk"
done
note "$(dpkg -s atoll | grep -E '^(Version|Depends|Installed-Size)' | tr '\n' ' ')"
dpkg-query -W -f '${Conffiles}\n' atoll | grep -q /etc/atoll/atoll.toml || fail "/etc/atoll/atoll.toml is not a conffile"
assert_eq "$(systemctl is-enabled atoll.service 2>&1)" disabled "atoll.service after install"
assert_eq "$(systemctl is-active atoll.service 2>&1)" inactive "atoll.service after install"
# The image has no man-db: verify without checking Documentation= pages.
out=$(systemd-analyze verify --man=no /usr/lib/systemd/system/atoll.service 2>&1) ||
    fail "systemd-analyze verify atoll.service: $out"
[ -z "$out" ] || echo "$out" | sed 's/^/  | verify: /'
note "systemd-analyze verify atoll.service: ok"
out=$("$PKG_ATOLL" check-config /etc/atoll/atoll.toml 2>&1) || fail "check-config /etc/atoll/atoll.toml: $out"
echo "$out" | sed 's/^/  | /'
echo "$out" | grep -q "^effects    nothing is taken" || fail "check-config does not say that nothing is taken"
