#!/usr/bin/env bash
# Compares h2load against volley-mock (valid APNs requests: JWT, topic, headers, ~300 B JSON body) with h2load
# against nghttpd serving a static file, same machine, same run, same TLS certificate. Prints both rates and the
# ratio. Usage: tools/mock-vs-nghttpd.sh [-n 200000] [-m 100] [-r rounds]
# Needs: a release build of volley-mock (built if missing), nghttpd + h2load (nghttp2-server, nghttp2-client).
set -euo pipefail
N=200000; M=100; ROUNDS=1
while getopts "n:m:r:" o; do case $o in n) N=$OPTARG;; m) M=$OPTARG;; r) ROUNDS=$OPTARG;; *) exit 2;; esac; done
cd "$(dirname "$0")/.."
BIN_DIR=$(swift build -c release --show-bin-path)
MOCK=${VOLLEY_MOCK:-$BIN_DIR/volley-mock}
[ -x "$MOCK" ] || swift build -c release --product volley-mock >/dev/null
TMP=$(mktemp -d /tmp/mock-vs-nghttpd.XXXXXX)
MOCK_PID=""; NGHTTPD_PID=""
cleanup() {
  [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null
  [ -n "$NGHTTPD_PID" ] && kill "$NGHTTPD_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

STATE=$TMP/state
"$MOCK" --state-dir "$STATE" --port 0 --no-duplicate-tracking > "$TMP/mock.out" 2>&1 &
MOCK_PID=$!
for _ in $(seq 1 200); do grep -q "listening on" "$TMP/mock.out" 2>/dev/null && break; sleep 0.05; done
MOCK_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$TMP/mock.out")
[ -n "$MOCK_PORT" ] || { echo "volley-mock did not start:"; cat "$TMP/mock.out"; exit 1; }
JWT=$("$MOCK" --state-dir "$STATE" --print-apns-jwt)
TOPIC=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["apns"]["topic"])' "$STATE/endpoints.json")
TOKEN=5f6aa01da3fbc9d7e2b4c8a1f0e3d2c1b0a9f8e7d6c5b4a3928170615f4e3d2c

# ~300 B APNs payload
{
  printf '{"aps":{"alert":{"title":"Volley benchmark","subtitle":"mock vs nghttpd",'
  printf '"body":"A notification body of a realistic length that says something to the user about an event."},'
  printf '"badge":7,"sound":"default","thread-id":"bench","mutable-content":1},"job":"job-0001","org":"org-42",'
  printf '"n":12345}'
} > "$TMP/body.json"

# nghttpd on a free port serving an (empty) static file at the APNs path
mkdir -p "$TMP/www/3/device" && : > "$TMP/www/3/device/$TOKEN"
NG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
nghttpd -a 127.0.0.1 -d "$TMP/www" "$NG_PORT" "$STATE/server.key" "$STATE/server.pem" > "$TMP/nghttpd.out" 2>&1 &
NGHTTPD_PID=$!
sleep 0.3

run_h2load() { # port → req/s
  h2load -n "$N" -c 1 -m "$M" -d "$TMP/body.json" \
    -H "authorization: bearer $JWT" -H "apns-topic: $TOPIC" -H "apns-push-type: alert" -H "apns-priority: 10" \
    -H "apns-expiration: 0" -H "content-type: application/json" \
    "https://127.0.0.1:$1/3/device/$TOKEN" > "$TMP/h2load.out" 2>&1 || true
  if ! grep -q "$N succeeded" "$TMP/h2load.out"; then
    echo "h2load against port $1 did not succeed fully:" >&2
    grep -E "requests:|status codes:" "$TMP/h2load.out" >&2
  fi
  sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$TMP/h2load.out"
}

printf "%-6s %14s %14s %8s\n" round "nghttpd req/s" "mock req/s" ratio
for r in $(seq 1 "$ROUNDS"); do
  NG=$(run_h2load "$NG_PORT")
  MK=$(run_h2load "$MOCK_PORT")
  RATIO=$(python3 -c "print(f'{$MK/$NG:.2f}')")
  printf "%-6s %14s %14s %8s\n" "$r" "$NG" "$MK" "$RATIO"
done
grep -E "status codes:" "$TMP/h2load.out" | sed 's/^/mock last run: /'
curl -s --http2 --cacert "$STATE/ca.pem" "https://127.0.0.1:$MOCK_PORT/_mock/stats" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("mock stats: accepted", d["accepted"]["apns"], "jwt_verifications", d["jwt_verifications"],
      "max_streams", d["max_concurrent_streams_seen"])'
