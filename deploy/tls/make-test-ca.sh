#!/usr/bin/env bash
# make-test-ca.sh: a private TEST certificate authority and the certificates signed by it
# for the studio broker's TLS listener (deploy/mosquitto/mosquitto.conf).
#
#   deploy/tls/make-test-ca.sh OUTDIR [CLIENT ...]
#
# Writes into OUTDIR (created 0700 if missing):
#   ca.crt  ca.key             the test CA (10 years); ca.crt is what clients verify against
#                              ([mqtt].ca_file of the backend, --cafile of mosquitto_sub)
#   broker.crt  broker.key     the broker's certificate, subjectAltName localhost, 127.0.0.1,
#                              ::1 plus every name in $BROKER_NAMES (space separated DNS names
#                              or IP addresses, e.g. BROKER_NAMES="mqtt.studio.lan 10.0.4.2")
#   client-NAME.crt/.key       one client certificate per CLIENT argument (CN = NAME,
#                              extendedKeyUsage clientAuth): optional, for a broker with
#                              require_certificate true; [mqtt].cert_file / key_file
#
# Idempotent: what exists and still verifies against ca.crt is kept, so running it again
# (e.g. to add a client) changes nothing else. Delete a file to have it re-issued; delete
# ca.key to start over (every certificate is re-issued then).
#
# For a TEST CA only: production certificates come from the studio's own PKI. Keys are
# written 0600 and unencrypted. Mosquitto reads broker.key after dropping privileges to
# the "mosquitto" user, so install it as root:mosquitto 0640 (see mosquitto.conf).
set -euo pipefail

if [ $# -lt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  [ $# -lt 1 ] && exit 2 || exit 0
fi
command -v openssl >/dev/null 2>&1 || { echo "make-test-ca.sh: openssl is not installed (apt-get install openssl)" >&2; exit 1; }

OUT=$1
shift
umask 077
mkdir -p "$OUT"
cd "$OUT"

DAYS_CA=3650
DAYS_LEAF=825   # the longest validity TLS clients accept for a leaf certificate

valid_leaf() {  # $1 = certificate: exists, signed by ca.crt, not expiring within a day
  [ -s "$1" ] && [ -s "${1%.crt}.key" ] \
    && openssl verify -CAfile ca.crt "$1" >/dev/null 2>&1 \
    && openssl x509 -in "$1" -noout -checkend 86400 >/dev/null 2>&1
}

# --- the CA -------------------------------------------------------------------------------
if [ ! -s ca.key ] || [ ! -s ca.crt ] || ! openssl x509 -in ca.crt -noout -checkend 86400 >/dev/null 2>&1; then
  rm -f ca.key ca.crt ca.srl broker.crt client-*.crt
  openssl req -x509 -new -nodes -newkey rsa:3072 -sha256 -days "$DAYS_CA" \
    -keyout ca.key -out ca.crt -subj "/O=Live-dealer studio/CN=Live-dealer studio TEST CA" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
  echo "created $OUT/ca.crt"
fi

issue() {  # $1 = basename, $2 = CN, $3 = extension text
  local name=$1 cn=$2 ext=$3
  if valid_leaf "$name.crt"; then
    return 0
  fi
  rm -f "$name.crt" "$name.key" "$name.csr"
  openssl req -new -nodes -newkey rsa:2048 -sha256 -keyout "$name.key" -out "$name.csr" \
    -subj "/O=Live-dealer studio/CN=$cn" 2>/dev/null
  printf '%s\n' "$ext" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 \
    -days "$DAYS_LEAF" -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
  echo "created $OUT/$name.crt"
}

# --- the broker ---------------------------------------------------------------------------
san="DNS:localhost,IP:127.0.0.1,IP:::1"
for n in ${BROKER_NAMES:-}; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san="$san,IP:$n"; else san="$san,DNS:$n"; fi
done
# A broker certificate whose names differ from the ones asked for now is re-issued.
if [ -s broker.crt ] && ! openssl x509 -in broker.crt -noout -ext subjectAltName 2>/dev/null \
    | tr -d ' \n' | sed 's/IPAddress:/IP:/g; s/0:0:0:0:0:0:0:1/::1/g' | grep -qxF "X509v3SubjectAlternativeName:${san}"; then
  rm -f broker.crt
fi
issue broker "${BROKER_CN:-localhost}" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=$san"

# --- optional client certificates -----------------------------------------------------------
for client in "$@"; do
  if [[ ! $client =~ ^[A-Za-z0-9_.-]{1,64}$ ]]; then
    echo "make-test-ca.sh: bad client name '$client' (letters, digits, _ . - only)" >&2
    exit 2
  fi
  issue "client-$client" "$client" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid"
done

chmod 0600 ./*.key
chmod 0644 ./*.crt
