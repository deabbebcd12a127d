#!/usr/bin/env bash
# Makes what the clients' "fresh install over TLS" tests need, in DIR: a CA (ca.pem), a server
# certificate for 127.0.0.1 and localhost signed by it, a client certificate (client.pem,
# client.key) for mTLS, and tls.toml — a server config with [tls], a processor token for
# `word-guard` (AGENTWIRE_TEST_PROCESSOR_TOKEN) and a `remote-guarded` agent (as in examples/agentwire.toml) with memory, and mtls.toml
# — the same server requiring client certificates signed by the CA. Test material
# only, made fresh for each run: never a real secret.
#   clients/testdata/tls.sh DIR
set -euo pipefail
dir=${1:?usage: tls.sh DIR}
mkdir -p "$dir"
cd "$dir"
if ! command -v openssl >/dev/null; then
  echo "tls.sh needs openssl (apt-get install openssl)" >&2
  exit 1
fi
quiet() { "$@" >/dev/null 2>&1; }
quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=agentwire test CA" -keyout ca.key -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
for name in server client; do
  quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=agentwire test $name" \
    -keyout "$name.key" -out "$name.csr"
  if [[ $name == server ]]; then
    extensions="subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
  else
    extensions="extendedKeyUsage=clientAuth"
  fi
  quiet openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -out "$name.pem" -extfile <(printf '%s\n' "$extensions")
done
rm -f ./*.csr ca.srl
cat > tls.toml <<TOML
# A TLS server with a processor token, for the clients' fresh-install tests (made by tls.sh).
[tls]
cert = "server.pem"
key = "server.key"

[[processor_tokens]]
token_env = "AGENTWIRE_TEST_PROCESSOR_TOKEN"
processors = ["word-guard"]

[processors.word-guard]
kind = "remote"
timeout_ms = 3000

[[agents]]
id = "remote-guarded"
model = "mock/echo"
input_processors = ["word-guard"]
memory = {}
TOML
sed 's/^key = "server.key"$/key = "server.key"\nclient_ca = "ca.pem"/' tls.toml >mtls.toml
