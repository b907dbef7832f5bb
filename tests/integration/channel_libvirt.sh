#!/bin/sh
# memgrant-host's libvirt paths on libvirt's test driver (built into libvirt0):
# the connection, domain lookup, a domain that is not running, a domain
# without the channel (the message shows the XML to add), and a domain with
# the channel, which gets as far as virDomainOpenChannel (the test driver
# cannot open channels; that error is reported, not hidden).
. "$(dirname "$0")/lib.sh"

HOSTBIN=$BUILD/memgrant-host
[ -x "$HOSTBIN" ] || skip "memgrant-host not built (configure found no libvirt)"
H="$HOSTBIN --state-dir $T/hs --timeout 2s"

# expect_fail RC PATTERN CMD...: exit code RC and PATTERN (grep -F) on stderr
expect_fail() {
	rc=$1 pat=$2
	shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" -eq "$rc" ] || fail "$*: exit $got, want $rc: $(cat "$T/err")"
	grep -qF -- "$pat" "$T/err" || fail "$*: stderr lacks '$pat': $(cat "$T/err")"
	[ -s "$T/out" ] && fail "$*: printed on stdout: $(cat "$T/out")"
	return 0
}

# the default test connection: domain "test" runs and has no channel
expect_fail 4 "domain 'test' has no channel org.memgrant.0" $H -c test:///default status test
grep -qF "<target type='virtio' name='org.memgrant.0'/>" "$T/err" || fail "XML snippet missing: $(cat "$T/err")"
grep -qF "<source mode='bind'/>" "$T/err" || fail "XML snippet missing the source"
expect_fail 4 "domain 'test' has no channel" $H -c test:///default grant test 1G
expect_fail 4 "no domain named 'nosuch' on test:///default" $H -c test:///default status nosuch
expect_fail 4 "no domain named 'nosuch'" $H -c test:///default watch nosuch
# nothing was recorded for requests that never left
[ -e "$T/hs/test.json" ] && fail "a generation was used although nothing was sent"

# a node of our own: a shut-off domain and one with the channel
cat > "$T/node.xml" <<XML
<node>
  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
    <name>stopped</name>
    <memory>1048576</memory>
    <os><type>hvm</type></os>
    <devices>
      <channel type='unix'>
        <source mode='bind' path='$T/stopped.sock'/>
        <target type='virtio' name='org.memgrant.0'/>
      </channel>
    </devices>
    <test:runstate>5</test:runstate>
  </domain>
  <domain type='test'>
    <name>withchan</name>
    <memory>1048576</memory>
    <os><type>hvm</type></os>
    <devices>
      <channel type='unix'>
        <source mode='bind' path='$T/withchan.sock'/>
        <target type='virtio' name='org.memgrant.0'/>
      </channel>
    </devices>
  </domain>
  <domain type='test'>
    <name>otherchan</name>
    <memory>1048576</memory>
    <os><type>hvm</type></os>
    <devices>
      <channel type='unix'>
        <source mode='bind' path='$T/other.sock'/>
        <target type='virtio' name='org.qemu.guest_agent.0'/>
      </channel>
    </devices>
  </domain>
</node>
XML
U=test://$T/node.xml
expect_fail 4 "domain 'stopped' is not running" $H -c "$U" status stopped
expect_fail 4 "domain 'otherchan' has no channel org.memgrant.0" $H -c "$U" status otherchan
expect_fail 4 "cannot open channel org.memgrant.0 of domain 'withchan'" $H -c "$U" status withchan
grep -q "not supported" "$T/err" || fail "the driver's reason is passed on: $(cat "$T/err")"
expect_fail 4 "no domain named 'test'" $H -c "$U" status test

# a connection that cannot be made
expect_fail 4 "cannot connect to test://$T/missing.xml" $H -c "test://$T/missing.xml" status x
echo ok
