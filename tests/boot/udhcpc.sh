#!/bin/sh
# udhcpc's hook in the test image: configure the leased address and default route.
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    [ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface"
    echo "railforge-init: lease $ip/$mask router $router on $interface"
    ;;
esac
exit 0
