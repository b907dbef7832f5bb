#!/bin/sh
# HTTPS provider refuses what it must and says why in one clear log line:
# a server certificate from the wrong CA, a server that wants a client
# certificate the agent does not have, an expired bearer token (and recovery
# once token_file is rewritten, without a restart), http:// without
# insecure_http (config error) and with it (a loud warning).  The local API
# keeps answering throughout and nothing is posted to a server it refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

fresh_daemon() { # yaml lines for providers.https
	rm -rf "$T/state" "$SIM" "$SIM.tree"
	: > "$T/daemon.log"
	https_config "$@"
	start_daemon
}

cp_start --client-ca "$CERTS/ca.pem" --token good-token
printf 'good-token\n' > "$T/token"

# 1. wrong CA: the agent does not trust the server
fresh_daemon "ca_file: $CERTS/other-ca.pem" "cert_file: $CERTS/client.pem" "key_file: $CERTS/client.key" \
	"token_file: $T/token"
log_wait 'warning: https (poll|send): .*(certificate|SSL).*is ca_file the CA' 10
$CTL status >/dev/null || fail "local API with a wrong CA"
stop_daemon
n=$(grep -c 'retrying with backoff' "$T/daemon.log")
[ "$n" -le 2 ] || fail "wrong CA logged $n warnings, want one per thread"
cp_wait 'len(s["inventories"]) == 0 and len(s["statuses"]) == 0' 1

# 2. no client certificate for a server that requires one
fresh_daemon "ca_file: $CERTS/ca.pem" "token_file: $T/token"
log_wait 'warning: https (poll|send): .*set providers.https.cert_file' 10
$CTL status >/dev/null || fail "local API without a client certificate"
stop_daemon
cp_wait 'len(s["tls_errors"]) >= 1 and len(s["inventories"]) == 0' 1

# 2b. a client certificate from a CA the server does not trust
fresh_daemon "ca_file: $CERTS/ca.pem" "cert_file: $CERTS/rogue.pem" "key_file: $CERTS/rogue.key" \
	"token_file: $T/token"
log_wait 'warning: https (poll|send): .*(alert|certificate|cert_file)' 10
stop_daemon
cp_wait 'len(s["inventories"]) == 0' 1

# 3. an expired token: 401 logged with the server's message; a new token in
# token_file is picked up without a restart
printf 'expired-token\n' > "$T/token"
fresh_daemon "ca_file: $CERTS/ca.pem" "cert_file: $CERTS/client.pem" "key_file: $CERTS/client.key" \
	"token_file: $T/token"
log_wait 'error: https (poll|send): .*refused by the control plane: HTTP 401: token expired or unknown' 10
$CTL status >/dev/null || fail "local API with an expired token"
cp_wait 'len(s["inventories"]) == 0 and len(s["refused"]) >= 1' 1
sleep 1
printf 'good-token\n' > "$T/token.new" && mv "$T/token.new" "$T/token"
cp_wait 'len(s["inventories"]) >= 1' 15
log_wait 'https send: control plane .* answers again' 10
grep -q 'expired-token\|good-token' "$T/daemon.log" && fail "a token is in the log"
stop_daemon
check_schema
cp_stop

# 4. http:// needs insecure_http: true; with it, a loud warning
HTTPS_URL=http://127.0.0.1:1 https_config
"$MEMGRANTD" -c "$T/memgrant.yaml" --check-config > "$T/check.out" 2>&1 && fail "http:// accepted without insecure_http"
grep -q 'insecure_http' "$T/check.out" || fail "config error does not name insecure_http: $(cat "$T/check.out")"
cp_start --http
rm -rf "$T/state" "$SIM" "$SIM.tree"
: > "$T/daemon.log"
HTTPS_URL=http://127.0.0.1:$CP_PORT https_config "insecure_http: true"
start_daemon
log_wait 'warning: providers.https: INSECURE: http://127.0.0.1' 5
cp_wait 'len(s["inventories"]) >= 1' 10
stop_daemon
echo "ok"
