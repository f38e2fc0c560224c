# shellcheck shell=sh
# nginx.service is active and serves its default page on localhost.
# shellcheck source=tests/vm-systemd/sdlib.sh
. "$VMT_DIR/sdlib.sh"

assert_active nginx.service
page=$(curl -s --max-time 30 http://localhost/) || fail "curl http://localhost/ failed"
case "$page" in
    *"Welcome to nginx"*) note "curl -s localhost: $(echo "$page" | grep -o '<title>[^<]*</title>')" ;;
    *) fail "curl -s localhost did not return nginx's page: $(echo "$page" | head -c 200)" ;;
esac
