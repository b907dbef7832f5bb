#!/bin/sh
# A CA or token rotation read half way (docs/security.md, "Credentials"):
#   1. token_file emptied (a writer that truncated it and has not written
#      yet), then a reload: the token read before is still sent, polls go
#      on, one warning names the file and why (once per thread); the
#      completed file is read at the next request, without another reload;
#   2. ca_file cut in the middle of its PEM block: the CA read before still
#      verifies the control plane (polls go on, no TLS error), one warning
#      (from the thread that saw the change first: the CA is parsed once for
#      both) names the file and why; the completed file is taken at the
#      next request.
# Before, an empty token stopped every request ("token_file ... is empty")
# and a cut CA failed every handshake until the files were whole again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"
cp_certs
K=$T/creds
mkdir -p "$K"
cp "$CERTS/ca.pem" "$K/ca.pem"
printf 'tok-1\n' > "$K/token"

cp_start --token tok-1
HTTPS_WAIT=1s https_config "ca_file: $K/ca.pem" "token_file: $K/token"
start_daemon
cp_wait 's["n_polls"] >= 1' 20
n_polls() { cp_state | python3 -c 'import json,sys; print(json.load(sys.stdin)["n_polls"])'; }
reads() { grep -c "https poll: bearer token read from $K/token" "$T/daemon.log"; }

# 1. the token: emptied, reloaded, completed
: > "$K/token"
kill -HUP "$DAEMON_PID"
log_wait 'configuration reloaded' 20
n0=$(n_polls)
cp_wait "s['n_polls'] >= $n0 + 2" 20
log_wait "https poll: token_file $K/token is empty; still sending the token read before" 5
r0=$(reads)
printf 'tok-1\n' > "$K/token"
i=0
while [ "$(reads)" -le "$r0" ]; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "the completed token file was not read again"; sleep 0.1
done
n=$(grep -c "https poll: token_file $K/token is empty" "$T/daemon.log")
[ "$n" = 1 ] || fail "the poller logged the empty token $n times, want once"
cp_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert set(s["auths"]) == {"Bearer tok-1"}, s["auths"]' || fail "a request went without the token"

# 2. the CA: cut half way, then completed
head -c "$(( $(wc -c < "$CERTS/ca.pem") / 2 ))" "$CERTS/ca.pem" > "$K/ca.pem.cut"
mv "$K/ca.pem.cut" "$K/ca.pem"
n0=$(n_polls)
cp_wait "s['n_polls'] >= $n0 + 3" 20
log_wait "https (poll|send): ca_file $K/ca.pem changed: it holds no whole PEM certificate .*still verifying with the CA read before" 5
grep -q 'curl error' "$T/daemon.log" && fail "a cut CA reached curl: $(grep 'curl error' "$T/daemon.log" | head -n 2)"
cp "$CERTS/ca.pem" "$K/ca.pem.new"
mv "$K/ca.pem.new" "$K/ca.pem"
# (the wording without the provider's parse, a libcurl not on OpenSSL 3: "the next connection verifies")
log_wait "https (poll|send): ca_file $K/ca.pem changed; (parsed again: .*)?the next connections? verif(y|ies) with it" 20
n0=$(n_polls)
cp_wait "s['n_polls'] >= $n0 + 2" 20
n=$(grep -Ec "https (poll|send): ca_file $K/ca.pem changed: it holds no whole PEM certificate" "$T/daemon.log")
[ "$n" = 1 ] || fail "the cut CA was logged $n times, want once"
stop_daemon
echo ok
