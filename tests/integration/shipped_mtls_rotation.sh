#!/bin/sh
# Credentials the way operators keep them (issue 21): root-only files in a
# root-owned folder (root:root 0600 in a 0700 folder), the split as shipped
# (memgrantd started as root with the shipped configuration, its agent as
# memgrant without capabilities, the root helper memgrant-helper):
# 1. --check-config says OK and how many days the certificate has left;
#    memgrant itself cannot read the key or the token;
# 2. a grant over mutual TLS with a bearer token is applied and reported,
#    every request presenting the client certificate (the test control plane
#    records which); a webhook's root-only secret is read too (else the
#    hooks, hence memgrantd, would not start);
# 3. rotation: a new pair from the same CA written over the files, SIGHUP:
#    the next requests present the new certificate, without a restart, and a
#    second grant is applied over it;
#    the root-only CA, read through the helper, is read and parsed once at
#    start and once at the reload, not once per connection thread, and
#    not at each handshake (issue 31);
# 4. --check-config refuses a key of another pair, naming key and file, and a
#    root-only key root does not own (the helper, root without capabilities,
#    could not open it), naming the fix.
. "$(dirname "$0")/lib.sh"
as_shipped
. "$(dirname "$0")/../controlplane/lib.sh"
shipped_config
cp_certs

# a second client pair from the same CA: the rotation
( cd "$CERTS" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client2.key -out client2.csr \
	-subj "/CN=test-guest" >/dev/null 2>&1 &&
  printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n' > client2.ext &&
  openssl x509 -req -in client2.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client2.pem -days 30 \
	-extfile client2.ext >/dev/null 2>&1 ) || fail "cannot make the second client pair"
fp() { openssl x509 -in "$1" -outform DER | sha256sum | cut -d' ' -f1; }
FP1=$(fp "$CERTS/client.pem")
FP2=$(fp "$CERTS/client2.pem")

# the operator's folder: root only
E=$T/etc/memgrant
mkdir -p "$E"
chmod 0700 "$E"
install -m 0600 -o root -g root "$CERTS/ca.pem" "$E/ca.pem"
install -m 0600 -o root -g root "$CERTS/client.pem" "$E/client.pem"
install -m 0600 -o root -g root "$CERTS/client.key" "$E/client.key"
printf 'tok-1\n' > "$E/token"
printf 'hook-secret\n' > "$E/webhook.secret"
chmod 0600 "$E/token" "$E/webhook.secret"
as_user memgrant cat "$E/client.key" >/dev/null 2>&1 && fail "memgrant can read the key: the test proves nothing"
as_user memgrant cat "$E/token" >/dev/null 2>&1 && fail "memgrant can read the token"

cp_start --client-ca "$CERTS/ca.pem" --token tok-1
C=$T/etc/memgrant.yaml
sed -i '/^providers:$/d; /^hooks:$/d' "$C"
cat >> "$C" <<YAML
providers:
  https:
    url: $CP_URL
    ca_file: $E/ca.pem
    cert_file: $E/client.pem
    key_file: $E/client.key
    token_file: $E/token
    wait: 2s
hooks:
  - events: [grant.applied]
    webhook: http://127.0.0.1:$CP_ADMIN/hook
    insecure_http: true
    secret_file: $E/webhook.secret
YAML
"$MEMGRANTCTL" sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
chmod 0666 "$SIM"
OPTS="$PKG_PATHS -o backend.type=sim -o backend.sim.state=$SIM"

# 1. the check
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $OPTS --check-config > "$T/check.out" 2>&1 || fail "--check-config: $(cat "$T/check.out")"
grep -q ': OK$' "$T/check.out" || fail "--check-config: $(cat "$T/check.out")"
# the certificate is valid for 2 days from its making: whole days left are
# 1, or 2 when the check runs within the second it was made
grep -Eq "^providers.https.cert_file: $E/client.pem is valid until .* \([12] days left\)$" "$T/check.out" ||
	fail "--check-config does not give the days left: $(cat "$T/check.out"; cat "$C")"

# 2. a grant over mTLS
opens_watch "$E" ca.pem
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $OPTS --foreground >> "$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" status > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "memgrantd did not come up"
	kill -0 $DAEMON_PID 2>/dev/null || fail "memgrantd exited at start"
	sleep 0.1
done
[ "$(ps -o user= -p "$DAEMON_PID")" = memgrant ] || fail "the agent runs as $(ps -o user= -p "$DAEMON_PID")"
cp_wait 'len(s["inventories"]) >= 1' 20
AGENT=$(jget "$("$MEMGRANTCTL" status --json)" agent) # the shipped default: the machine id
cp_admin POST /agents/$AGENT/grants '{"type":"grant","id":"g-1","size":"256M"}' >/dev/null
cp_wait 'st("g-1")[-1:] == ["applied"]' 30
cp_wait "any(p['client_cert'] == '$FP1' for p in s['polls'])" 10
grep -q 'Permission denied\|curl error 58' "$T/daemon.log" && fail "a credential file was refused: $(cat "$T/daemon.log")"
ca_start=$(opens)
# without the provider's parse (a libcurl not on OpenSSL 3, logged) each thread reads it
CA_BY_CURL=
grep -q "https: ca_file .* is handed to curl" "$T/daemon.log" && CA_BY_CURL=1
[ -n "$CA_BY_CURL" ] || [ "$ca_start" -eq 1 ] || fail "the root-only ca_file was read $ca_start times at start, want once"

# 3. rotation: new files in place, SIGHUP, the next connection uses them
install -m 0600 -o root -g root "$CERTS/client2.pem" "$E/client.pem.new"
install -m 0600 -o root -g root "$CERTS/client2.key" "$E/client.key.new"
mv "$E/client.pem.new" "$E/client.pem"
mv "$E/client.key.new" "$E/client.key"
n_polls=$(cp_state | python3 -c 'import json,sys; print(json.load(sys.stdin)["n_polls"])')
kill -HUP $DAEMON_PID
log_wait 'configuration reloaded' 20
log_wait 'credential files read again after a reload' 20
cp_wait "any(p['client_cert'] == '$FP2' for p in s['polls'])" 20
cp_admin POST /agents/$AGENT/grants '{"type":"grant","id":"g-2","size":"128M"}' >/dev/null
cp_wait 'st("g-2")[-1:] == ["applied"]' 30
cp_state > "$T/state.json"
python3 - "$T/state.json" "$FP1" "$FP2" "$n_polls" <<'PY' || fail "which certificate was presented"
import json, sys
s, fp1, fp2, n = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
seen = [p["client_cert"] for p in s["polls"]]
assert None not in seen, "a poll without a client certificate"
assert seen[0] == fp1, "the first poll presented %s" % seen[0]
# once the new certificate is presented, the old one never is again
k = seen.index(fp2)
assert all(x == fp2 for x in seen[k:]), seen
g2 = [x for x in s["statuses"] if x["body"]["id"] == "g-2"]
assert g2 and all(x["client_cert"] == fp2 for x in g2), [x["client_cert"] for x in g2]
print("polls", len(seen), "old", seen.count(fp1), "new", seen.count(fp2), "switch at", k, "reload at", n)
PY
kill -0 $DAEMON_PID || fail "memgrantd is gone after the reload"
stop_daemon
ca_reload=$(( $(opens) - ca_start ))
parses=$(grep -c "https.*: ca_file $E/ca.pem \(changed; \)\{0,1\}parsed" "$T/daemon.log")
echo "root-only ca_file: read $ca_start time(s) at start, $ca_reload after the reload; parses logged: $parses${CA_BY_CURL:+ (handed to curl: not checked)}"
if [ -z "$CA_BY_CURL" ]; then
	[ "$ca_reload" -eq 1 ] || fail "the root-only ca_file was read $ca_reload times after the reload, want once"
	[ "$parses" -eq 2 ] || fail "the root-only ca_file was parsed $parses times, want 2 (start, reload)"
fi
opens_stop # the files are written below

# 4. a key of another pair; a root-only key root does not own
install -m 0600 -o root -g root "$CERTS/client.key" "$E/client.key"
rc=0
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $OPTS --check-config > "$T/check2.out" 2>&1 || rc=$?
expect_eq "--check-config with the key of another pair: exit ($(cat "$T/check2.out"))" "$rc" 1
grep -q "providers.https.key_file: $E/client.key is not the key of the certificate $E/client.pem" "$T/check2.out" ||
	fail "the refusal does not name key and file: $(cat "$T/check2.out")"
install -m 0600 -o root -g root "$CERTS/client2.key" "$E/client.key"
chown "$(id -u memgrant)" "$E/token"
rc=0
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $OPTS --check-config > "$T/check3.out" 2>&1 || rc=$?
expect_eq "--check-config with a token root does not own: exit ($(cat "$T/check3.out"))" "$rc" 1
grep -q "providers.https.token_file: $E/token: the root helper.*cannot: Permission denied.*chown root:root $E/token" \
	"$T/check3.out" || fail "the refusal of the token: $(cat "$T/check3.out")"
chown root "$E/token"

# 5. a private key given as ca_file
install -m 0600 -o root -g root "$CERTS/client2.key" "$E/ca.pem"
rc=0
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $OPTS --check-config > "$T/check4.out" 2>&1 || rc=$?
expect_eq "--check-config with a private key as ca_file: exit ($(cat "$T/check4.out"))" "$rc" 1
grep -q "providers.https.ca_file: $E/ca.pem holds a private key" "$T/check4.out" ||
	fail "the refusal of a key as ca_file: $(cat "$T/check4.out")"
install -m 0600 -o root -g root "$CERTS/ca.pem" "$E/ca.pem"
cat "$T/check.out" "$T/check2.out" "$T/check3.out" "$T/check4.out"
echo ok
