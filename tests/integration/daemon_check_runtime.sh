#!/bin/sh
# memgrantd --check-config reports what would fail at run time, at the key:
# a CA, certificate, key or token file that does not exist or cannot be read,
# a hook's exec that is not an executable file, a webhook secret that cannot
# be read, a channel path whose folder does not exist, the HTTPS provider or
# a webhook where the process may not open network sockets.  The same files, once
# there, pass.  A misspelt backend type ("Sim") is one message, not two.
. "$(dirname "$0")/lib.sh"
write_config
cp "$T/memgrant.yaml" "$T/base.yaml"
mkdir -p "$T/tls"
cat >> "$T/memgrant.yaml" <<YAML
providers:
  https:
    url: https://cp.example:8443/v1
    ca_file: $T/tls/ca.pem
    cert_file: $T/tls/client.pem
    key_file: $T/tls
    token_file: $T/tls/token
  channel:
    path: $T/virtio-ports/org.memgrant.0
hooks:
  - events: [grant.applied]
    exec: $T/hook.sh
  - events: ["*"]
    exec: $T
  - events: ["*"]
    webhook: https://hooks.example/memgrant
    secret_file: $T/secret
YAML
printf '#!/bin/sh\nexit 0\n' > "$T/hook.sh"
chmod 0644 "$T/hook.sh"
out=$("$MEMGRANTD" -c "$T/memgrant.yaml" --check-config 2>&1) && fail "missing files accepted: $out"
echo "$out"
has() { echo "$out" | grep -q -- "$1" || fail "--check-config does not say '$1': $out"; }
has "memgrant.yaml:[0-9]*:[0-9]*: providers.https.ca_file: $T/tls/ca.pem: no such file (ENOENT); the agent could not connect"
has "providers.https.cert_file: $T/tls/client.pem: no such file (ENOENT)"
has "providers.https.key_file: $T/tls is a folder, not a file"
has "providers.https.token_file: $T/tls/token: no such file (ENOENT)"
has "providers.channel.path: the folder $T/virtio-ports does not exist"
has "hooks\[0\].exec: $T/hook.sh is not executable (mode 0644)"
has "hooks\[1\].exec: $T is not a regular file"
has "hooks\[2\].secret_file: $T/secret: no such file (ENOENT); the webhook could not be signed"
expect_eq "messages" "$(echo "$out" | grep -c 'memgrant.yaml:')" 8

# the daemon itself loads the same file (run-time checks are --check-config's)
"$MEMGRANTD" -c "$T/memgrant.yaml" --check-config -o providers.https.ca_file=/nonexistent/ca.pem > "$T/o.out" 2>&1 &&
	fail "override to a missing CA accepted"
grep -q "override 'providers.https.ca_file=/nonexistent/ca.pem': providers.https.ca_file: /nonexistent/ca.pem: no such file" "$T/o.out" ||
	fail "override position: $(cat "$T/o.out")"

# all there: OK (a real pair: the key must be the certificate's)
sh "$(dirname "$0")/../controlplane/mkcerts.sh" "$T/certs" || fail "cannot make test certificates"
cp "$T/certs/ca.pem" "$T/certs/client.pem" "$T/tls/"
cp "$T/certs/client.key" "$T/key.pem"
echo x > "$T/tls/token"
echo s > "$T/secret"
mkdir -p "$T/virtio-ports"
chmod 0755 "$T/hook.sh"
sed -i "s|key_file: $T/tls\$|key_file: $T/key.pem|; s|exec: $T\$|exec: $T/hook.sh|" "$T/memgrant.yaml"
out=$("$MEMGRANTD" -c "$T/memgrant.yaml" --check-config 2>&1) || fail "complete config refused: $out"
echo "$out" | grep -q "OK" || fail "no OK: $out"

# under the shipped unit (no IPv4/IPv6 sockets, as RestrictAddressFamilies
# does it) the HTTPS provider and the webhook are refused with the way out;
# a configuration that needs no network passes there
if ! "$BUILD/tests/tools/no_network" true 2>"$T/nonet.err"; then
	# qemu-user (.ci/s390x.sh) loads no seccomp filter; checked natively
	echo "network check left out: $(cat "$T/nonet.err")"
else
out=$("$BUILD/tests/tools/no_network" "$MEMGRANTD" -c "$T/memgrant.yaml" --check-config 2>&1) &&
	fail "HTTPS and a webhook accepted without network: $out"
has "providers.https.url: this process may not open network sockets (EAFNOSUPPORT): memgrantd.service runs without network unless its network drop-in is installed (see NETWORK in memgrantd(8))"
has "hooks\[2\].webhook: this process may not open network sockets"
expect_eq "messages without network" "$(echo "$out" | grep -c 'memgrant.yaml:')" 2
out=$("$BUILD/tests/tools/no_network" "$MEMGRANTD" -c "$T/base.yaml" --check-config 2>&1) ||
	fail "a configuration without HTTPS or webhooks refused without network: $out"
fi

# an unreadable file, when not root can tell (root reads everything)
if [ "$(id -u)" -ne 0 ]; then
	chmod 000 "$T/tls/token"
	out=$("$MEMGRANTD" -c "$T/memgrant.yaml" --check-config 2>&1) && fail "unreadable token accepted"
	echo "$out" | grep -q "providers.https.token_file: $T/tls/token: Permission denied (EACCES)" ||
		fail "unreadable token: $out"
	chmod 0600 "$T/tls/token"
fi

# backend type in the wrong case: one message, which says how to write it
cp "$T/base.yaml" "$T/sim.yaml"
sed -i 's/^  type: sim$/  type: Sim/' "$T/sim.yaml"
out=$("$MEMGRANTD" -c "$T/sim.yaml" --check-config 2>&1) && fail "type: Sim accepted"
expect_eq "messages for type: Sim" "$(echo "$out" | grep -c 'sim.yaml:')" 1
echo "$out" | grep -q "backend.type: 'Sim' is not one of sysfs, sim (write it in lowercase: 'sim')" ||
	fail "type: Sim message: $out"
echo ok
