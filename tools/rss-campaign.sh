#!/usr/bin/env bash
# Peak RSS of one `volley worker` resolving and sending a campaign to one group of N users (1 iOS device each),
# against a local redis-server and volley-mock. The 1,000,000-device group must stay within 1.2× the
# peak RSS of a 10,000-device group (resolution streams; nothing holds the whole group).
#
#   tools/rss-campaign.sh [N ...]        default: 10000 1000000
# Needs a built tree (swift build -c release, or BUILD=debug). Prints one line per N: devices, seconds, VmHWM.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-release}
BIN=.build/$BUILD
SIZES=("$@"); [ ${#SIZES[@]} -eq 0 ] && SIZES=(10000 1000000)
for n in "${SIZES[@]}"; do
  T=$(mktemp -d /tmp/volley-rss.XXXX)
  redis-server --port 0 --unixsocket "$T/r.sock" --save '' --appendonly no --dir "$T" --daemonize yes \
    --pidfile "$T/r.pid" >/dev/null
  "$BIN/volley-mock" --state-dir "$T/mock" --no-duplicate-tracking >"$T/mock.log" 2>&1 &
  MOCK=$!
  for _ in $(seq 100); do [ -f "$T/mock/endpoints.json" ] && [ -S "$T/r.sock" ] && break; sleep 0.1; done
  E="$T/mock/endpoints.json"
  cat >"$T/v.yaml" <<YAML
apps:
  - name: rss
    apns:
      keyFile: "$(jq -r .apns.p8_file "$E")"
      keyId: "$(jq -r .apns.key_id "$E")"
      teamId: "$(jq -r .apns.team_id "$E")"
      topic: "$(jq -r .apns.topic "$E")"
      host: "$(jq -r .host "$E")"
      port: $(jq -r .port "$E")
      caFile: "$(jq -r .ca_file "$E")"
    fcm:
      serviceAccountFile: "$(jq -r .fcm.service_account_file "$E")"
      endpoint: "https://$(jq -r .host "$E"):$(jq -r .port "$E")"
      caFile: "$(jq -r .ca_file "$E")"
redis:
  url: "unix://$T/r.sock"
quotas: {ios: 100000000, android: 100000000}
worker: {shardSize: 100000000}
log: {level: warning}
YAML
  python3 - "$n" "$T" <<'PY'
import sys
n, t = int(sys.argv[1]), sys.argv[2]
with open(f"{t}/devices.jsonl", "w") as d:
    for u in range(n):
        d.write('{"org":"o","app":"rss","user":"u%d","platform":"ios","token":"%064x"}\n' % (u, u + 1))
with open(f"{t}/dir.jsonl", "w") as g:
    step = 10000
    for s in range(0, n, step):
        members = ",".join('"u%d"' % u for u in range(s, min(n, s + step)))
        g.write('{"org":"o","kind":"group","id":"all","members":[%s]}\n' % members)
PY
  "$BIN/volley" devices import --config "$T/v.yaml" "$T/devices.jsonl" >/dev/null
  "$BIN/volley" directory import --config "$T/v.yaml" "$T/dir.jsonl" >/dev/null 2>&1
  "$BIN/volley" worker --config "$T/v.yaml" --consumer rss >"$T/worker.log" 2>&1 &
  W=$!
  START=$(date +%s.%N)
  "$BIN/volley" send --config "$T/v.yaml" --org o --app rss --recipients all --title RSS --body test \
    --wait --json --timeout 1800 >"$T/report.json"
  END=$(date +%s.%N)
  HWM=$(grep VmHWM /proc/$W/status | awk '{print $2}')
  echo "devices=$n accepted=$(jq .accepted "$T/report.json") seconds=$(echo "$END - $START" | bc)" \
    "worker_peak_rss_kb=$HWM"
  kill -9 $W $MOCK 2>/dev/null || true
  redis-cli -s "$T/r.sock" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$T"
done
