#!/bin/busybox sh
# /init of the test's busybox image: bring up the NIC the node PXE-booted from (BOOTIF), DHCP on it, report host
# name, MAC, addresses and DMI serial to railforge.report with the host's railforge.token, then power off. Booted
# as an installer host (its command line carries the installer's preseed url=), it stands in for the installer's
# late command: it reports phase "installed" and reboots, as the installer does. (No `wget -T`: it segfaults in
# busybox-static 1.35.)
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for pass in 1 2; do for m in $(cat /modules.order); do insmod "/lib/modules/$m" 2>/dev/null; done; done
for w in $(cat /proc/cmdline); do
  case "$w" in
    railforge.host=*) HOST=${w#*=} ;;
    railforge.report=*) REPORT=${w#*=} ;;
    railforge.token=*) TOKEN=${w#*=} ;;
    BOOTIF=01-*) MAC=$(echo "${w#BOOTIF=01-}" | tr - :) ;;
    url=*) PHASE=installed ;;
  esac
done
echo "railforge-init: host=$HOST mac=$MAC report=$REPORT"
IF=""
n=0
while [ -z "$IF" ] && [ "$n" -lt 20 ]; do
  for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$MAC" ] && IF=${d##*/}; done
  [ -z "$IF" ] && sleep 1
  n=$((n + 1))
done
[ -n "$IF" ] || { echo "railforge-init: no NIC with MAC $MAC"; poweroff -f; }
hostname "$HOST"
ip link set lo up
ip link set "$IF" up
udhcpc -i "$IF" -s /udhcpc.sh -q -f -n -t 20 -T 3 || { echo "railforge-init: no DHCP lease"; poweroff -f; }
ADDRS=$(ip -4 -o addr show dev "$IF" | awk '{printf "%s\"%s\"", sep, $4; sep=","}')
SERIAL=$(cat /sys/class/dmi/id/product_serial 2>/dev/null)
BODY="{\"host\":\"$HOST\",\"mac\":\"$MAC\",\"addresses\":[$ADDRS],\"serial\":\"$SERIAL\",\"phase\":\"${PHASE:-booted}\"}"
echo "railforge-init: POST $BODY"
if wget -q -O /tmp/answer --header "Content-Type: application/json" --header "Authorization: Bearer $TOKEN" --post-data "$BODY" "$REPORT"; then
  echo "railforge-init: answer $(cat /tmp/answer)"
else
  echo "railforge-init: report failed"
fi
[ "$PHASE" = installed ] && reboot -f
poweroff -f
