#!/bin/sh
# The CA bundle is parsed once per change of the file for the provider, not
# per connection thread nor at every connection (issue 31): ca_file is
# opened exactly once at start, no more across control-plane outages that
# force new TLS handshakes, and exactly once after it was replaced.  The
# opens are counted with inotify on the CA's own folder (nothing else opens
# it).  Then both threads verify with the replacement: a CA that did not
# sign the server's certificate fails the poller's next handshake; once the
# server presents a certificate of that CA, the poller's and the sender's
# handshakes succeed with it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

cp_start
mkdir -p "$T/ca"
cp "$CERTS/ca.pem" "$T/ca/agent-ca.pem"
opens_watch "$T/ca" agent-ca.pem

HTTPS_WAIT=1s https_config "ca_file: $T/ca/agent-ca.pem"
start_daemon
cp_wait 'len(s["inventories"]) >= 1 and s["n_polls"] >= 1' 20
grep -q "https: ca_file .* is handed to curl" "$T/daemon.log" &&
	skip "skipped: $(grep -o 'https: ca_file .* is handed to curl.*' "$T/daemon.log")"
# each outage drops the connections: the next poll is a new TLS handshake
outage() {
	n=$(jget "$(cp_state)" n_polls)
	cp_admin POST /mode '{"mode":"down"}' >/dev/null
	sleep 1
	cp_admin POST /mode '{"mode":"ok"}' >/dev/null
	cp_wait "s[\"n_polls\"] > $n" 30
}
sleep 1 # the watcher's count catches up with the first handshakes
first=$(opens)
[ "$first" -ge 1 ] || fail "ca_file never opened by the agent (opens: $first)"
[ "$first" -eq 1 ] || fail "ca_file opened $first times at start: parsed per thread, not once per provider"
outage
outage
outage
sleep 1
again=$(opens)
[ "$again" -eq "$first" ] || fail "ca_file opened $((again - first)) more times across 3 reconnects: parsed per connection, not once per change"
cp "$CERTS/ca.pem" "$T/ca/new.pem"
mv "$T/ca/new.pem" "$T/ca/agent-ca.pem"
before=$(opens)
outage
# the watcher counts the open a moment after the handshake that made it
i=0
while [ "$(opens)" -le "$before" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
after=$(opens)
[ "$after" -gt "$before" ] || fail "a replaced ca_file was not read again (opens $before -> $after)"
sleep 1 # a second open (the other thread) would be counted by now
after=$(opens)
[ "$after" -eq $((before + 1)) ] || fail "a replaced ca_file was read $((after - before)) times, want once"
echo "ca_file opens: $first at start, $((again - first)) across 3 reconnects, $((after - before)) after it was replaced"

# a CA that did not sign the server's certificate: the poller's next
# request, with no outage, is a new connection, and its handshake fails
# (neither the connection made with the CA before nor its TLS session serve)
cp "$CERTS/other-ca.pem" "$T/ca/new.pem"
mv "$T/ca/new.pem" "$T/ca/agent-ca.pem"
before=$(opens)
log_wait 'https poll: .*\(curl error 60\)' 20
n=$(jget "$(cp_state)" n_polls)
sleep 3 # retries every second: a resumed session or a kept connection would poll
[ "$(jget "$(cp_state)" n_polls)" -eq "$n" ] || fail "a poll went through with a CA that did not sign the server"
wrong=$(( $(opens) - before ))
[ "$wrong" -eq 1 ] || fail "the other CA was read $wrong times, want once"
# the server now presents a certificate of that CA (and forgets its TLS
# sessions): the poller gets through, and the sender, which last connected
# with the first CA, reports a grant over a new handshake with the other CA
( cd "$CERTS" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server2.key -out server2.csr \
	-subj "/CN=memgrant test control plane" >/dev/null 2>&1 &&
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' \
	> server2.ext &&
  openssl x509 -req -in server2.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial -out server2.pem \
	-days 2 -extfile server2.ext >/dev/null 2>&1 &&
  cp server2.pem server.pem && cp server2.key server.key ) || fail "cannot make a server certificate of the other CA"
cp_admin POST /mode '{"mode":"down","restart":true}' >/dev/null
sleep 1
cp_admin POST /mode '{"mode":"ok"}' >/dev/null
cp_wait "s[\"n_polls\"] > $n" 30
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-1","size":"128M"}' >/dev/null
cp_wait 'st("g-1")[-1:] == ["applied"]' 30
grep -q 'https send: .*curl error' "$T/daemon.log" && fail "the sender failed a request: $(grep 'https send: .*curl error' "$T/daemon.log")"
[ "$(opens)" -eq $((before + 1)) ] || fail "ca_file read again although it did not change"
parses=$(grep -c "https.*: ca_file $T/ca/agent-ca.pem \(changed; \)\{0,1\}parsed" "$T/daemon.log")
echo "the other CA: read $wrong time, refused by the poller's handshake, then both threads verified with it; parses logged: $parses"
[ "$parses" -eq 3 ] || fail "the CA was parsed $parses times, want 3 (start, two replacements)"
stop_daemon
echo ok
