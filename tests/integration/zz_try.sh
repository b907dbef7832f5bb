. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M --no-firmware
write_config "  " 
sed -i 's/^    standby: .*/    standby: 2G\n    has_firmware: false/' $T/memgrant.yaml
start_daemon
$CTL status
$CTL grant 256M --wait; echo rc=$?
$CTL grant 3G --wait; echo rc=$?
stop_daemon
grep -v debug $T/daemon.log
