#!/usr/bin/env bash
# Installs the system packages Volley builds, tests and demos with, when any is missing (Debian/Ubuntu).
set -euo pipefail
pkgs=(libnghttp2-dev libssl-dev libhiredis-dev redis-server nghttp2-client nghttp2-server pkg-config openssl curl
  python3-venv wrk)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packaged redis-server starts a system instance on install; Volley never uses it (tests start their own).
command -v redis-server >/dev/null && command -v h2load >/dev/null && command -v swift >/dev/null || {
  echo "ensure-deps: redis-server, h2load and swift must be on PATH" >&2; exit 1; }
