#!/bin/sh
# mkcerts.sh DIR: test certificates for the reference control plane, made
# fresh at every run with the openssl command line tool (nothing is checked in):
#   ca.pem ca.key             the test CA
#   server.pem server.key     server certificate for 127.0.0.1 and localhost, signed by ca
#   client.pem client.key     client certificate (mTLS), signed by ca
#   other-ca.pem other-ca.key a CA nobody uses: "wrong CA" for the agent
#   rogue.pem rogue.key       client certificate signed by other-ca
set -eu
d=$1
mkdir -p "$d"
cd "$d"
days=2
ossl() { openssl "$@" >/dev/null 2>&1 || { echo "mkcerts: openssl $1 failed" >&2; openssl "$@" >&2; exit 1; }; }

mkca() { # name subject
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.pem" \
		-days $days -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign"
}
mkcert() { # name ca subject extfile-lines
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$3"
	printf '%s\n' "$4" > "$1.ext"
	ossl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" -days $days \
		-extfile "$1.ext"
	rm -f "$1.csr" "$1.ext"
}

mkca ca "memgrant test CA"
mkca other-ca "memgrant other CA"
mkcert server ca "memgrant test control plane" \
	"subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE"
mkcert client ca "test-guest" \
	"extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
mkcert rogue other-ca "test-guest" \
	"extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
chmod 600 ./*.key
