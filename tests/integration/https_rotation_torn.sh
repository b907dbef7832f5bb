#!/bin/sh
# A key rotation read half way (docs/security.md, "Credentials"): the
# certificate and key are rewritten while memgrantd reloads.
#   1. the key file cut in the middle of its PEM block, SIGHUP: the old pair
#      stays in use (polls and a grant go on with it), one warning names
#      both files and why (once per thread);
#   2. the new certificate with the old key (another pair), SIGHUP: the same;
#   3. the new key completes the pair: the next request uses it, without
#      another reload, and the old certificate is never presented again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"
cp_certs
( cd "$CERTS" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client2.key -out client2.csr \
	-subj "/CN=test-guest" >/dev/null 2>&1 &&
  printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n' > client2.ext &&
  openssl x509 -req -in client2.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client2.pem -days 30 \
	-extfile client2.ext >/dev/null 2>&1 ) || fail "cannot make the second client pair"
fp() { openssl x509 -in "$1" -outform DER | sha256sum | cut -d' ' -f1; }
FP1=$(fp "$CERTS/client.pem")
FP2=$(fp "$CERTS/client2.pem")
K=$T/tls
mkdir -p "$K"
cp "$CERTS/client.pem" "$K/client.pem"
cp "$CERTS/client.key" "$K/client.key"

cp_start --client-ca "$CERTS/ca.pem"
HTTPS_WAIT=1s https_config "ca_file: $CERTS/ca.pem" "cert_file: $K/client.pem" "key_file: $K/client.key"
start_daemon
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-1","size":"128M"}' >/dev/null
cp_wait 'st("g-1")[-1:] == ["applied"]' 20
cp_wait "any(p['client_cert'] == '$FP1' for p in s['polls'])" 10
n_polls() { cp_state | python3 -c 'import json,sys; print(json.load(sys.stdin)["n_polls"])'; }

# 1. torn: the new certificate whole, the new key cut half way
cp "$CERTS/client2.pem" "$K/client.pem"
head -c "$(( $(wc -c < "$CERTS/client2.key") / 2 ))" "$CERTS/client2.key" > "$K/client.key"
kill -HUP "$DAEMON_PID"
log_wait 'configuration reloaded' 20
n0=$(n_polls)
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-2","size":"128M"}' >/dev/null
cp_wait 'st("g-2")[-1:] == ["applied"]' 20
cp_wait "s['n_polls'] >= $n0 + 2" 20
log_wait "after the reload, cert_file $K/client.pem and key_file $K/client.key: the key is not a whole PEM private key" 5

# 2. another pair: the new certificate, the old key
cp "$CERTS/client.key" "$K/client.key"
kill -HUP "$DAEMON_PID"
i=0
while [ "$(grep -c 'configuration reloaded' "$T/daemon.log")" -lt 2 ]; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "the second reload was not done"; sleep 0.1
done
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-3","size":"128M"}' >/dev/null
cp_wait 'st("g-3")[-1:] == ["applied"]' 20
log_wait "cert_file $K/client.pem and key_file $K/client.key: the key is not the certificate.s \(another pair\)" 5
grep -q 'curl error 58\|could not load' "$T/daemon.log" && fail "a refused pair reached curl: $(grep 'curl error' "$T/daemon.log" | head -n 2)"

# 3. the pair completed, no reload: the next request presents it
cp "$CERTS/client2.key" "$K/client.key"
cp_wait "any(p['client_cert'] == '$FP2' for p in s['polls'])" 20
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-4","size":"128M"}' >/dev/null
cp_wait 'st("g-4")[-1:] == ["applied"]' 20
cp_state > "$T/state.json"
python3 - "$T/state.json" "$FP1" "$FP2" <<'PY' || fail "which certificate was presented"
import json, sys
s, fp1, fp2 = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
seen = [p["client_cert"] for p in s["polls"]]
assert None not in seen, "a poll without a client certificate"
k = seen.index(fp2)
assert all(x == fp1 for x in seen[:k]) and all(x == fp2 for x in seen[k:]), seen
for g, want in (("g-2", fp1), ("g-3", fp1), ("g-4", fp2)):
    got = {x["client_cert"] for x in s["statuses"] if x["body"]["id"] == g}
    assert got == {want}, (g, got)
print("polls", len(seen), "old", k, "new", len(seen) - k)
PY
# once per refusal and thread (the poller and the sender read the files each)
for th in poll send; do
	n=$(grep -c "https $th: after the reload.*still using the certificate and key read before" "$T/daemon.log")
	[ "$n" -ge 1 ] && [ "$n" -le 2 ] || fail "the https $th thread logged the refusals $n times, want once each"
done
stop_daemon
echo ok
