#!/usr/bin/env bash
# Heartbeats against the real binary, the way the field sees them (README, "Heartbeats"):
#  - a provider that goes quiet for 1.6 s after its first event, a route with heartbeatSeconds 0.5: the stream
#    carries `: keep-alive` comments, and without them its bytes are exactly the provider's;
#  - the official OpenAI and Anthropic Python SDKs read such a stream unchanged (they live in a venv under
#    .build, installed from PyPI on first use; without PyPI they are reported as skipped, by name);
#  - nginx in front with proxy_read_timeout 1s and a 2.5 s silence: the stream survives with heartbeats and is
#    cut without them.
# Usage: Tests/blackbox/heartbeats.sh PATH/TO/sse-relay
set -u
BIN=${1:?usage: heartbeats.sh PATH/TO/sse-relay}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
PIDS=()
passed=0; failed=0; skipped=0
ok()   { passed=$((passed+1)); echo "ok   - $1"; }
fail() { failed=$((failed+1)); echo "FAIL - $1"; [ -n "${2:-}" ] && echo "       $2"; }
skip() { skipped=$((skipped+1)); echo "skip - $1 ($2)"; }
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The provider, quiet for PAUSE seconds after its first event.
provider() {  # PAUSE DIR -> sets PROVIDER_PORT
  mkdir -p "$2"
  python3 "$HERE/paused_provider.py" "$1" "$2" >"$2/port" &
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -s "$2/port" ] && break; sleep 0.05; done
  PROVIDER_PORT=$(head -n 1 "$2/port")
}

relay() {  # PROVIDER_PORT -> sets RELAY_PORT
  RELAY_PORT=$(free_port)
  cat >"$WORK/relay.json" <<JSON
{ "listen": {"host": "127.0.0.1", "port": $RELAY_PORT},
  "upstreams": {
    "openai": {"provider": "openai", "baseURL": "http://127.0.0.1:$1", "key": {"env": "HB_KEY"}},
    "anthropic": {"provider": "anthropic", "baseURL": "http://127.0.0.1:$1", "key": {"env": "HB_KEY"}} },
  "routes": [
    {"prefix": "/v1/chat/completions", "exact": true, "upstream": "openai", "auth": "none", "heartbeatSeconds": 0.5},
    {"prefix": "/quiet/v1/chat/completions", "exact": true, "upstream": "openai", "auth": "none", "heartbeatSeconds": 0},
    {"prefix": "/v1/messages", "exact": true, "upstream": "anthropic", "auth": "none", "heartbeatSeconds": 0.5} ] }
JSON
  HB_KEY=sk-heartbeat-check "$BIN" --config "$WORK/relay.json" >"$WORK/relay.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do "$BIN" --probe "http://127.0.0.1:$RELAY_PORT/healthz" >/dev/null 2>&1 && return 0; sleep 0.05; done
  fail "the relay starts" "$(tail -n 5 "$WORK/relay.log")"
  exit 1
}

BODY='{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}'

provider 1.6 "$WORK/p1"
relay "$PROVIDER_PORT"
curl -sS -N "http://127.0.0.1:$RELAY_PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$BODY" >"$WORK/raw.txt"
beats=$(grep -c '^: keep-alive$' "$WORK/raw.txt")
[ "$beats" -ge 2 ] && [ "$beats" -le 3 ] && ok "a 1.6 s silence carries $beats heartbeats at 0.5 s" || fail "heartbeats in a silence" "$beats heartbeats"
python3 - "$WORK/raw.txt" "$WORK/p1/1.body" <<'PY' && ok "without the heartbeats, the bytes are the provider's" || fail "bytes exact around heartbeats"
import sys
got = open(sys.argv[1], "rb").read()
sent = open(sys.argv[2], "rb").read()
first = sent.index(b"\n\n") + 2
# Heartbeats only at an event boundary: all of them between the first event and the rest.
assert got.startswith(sent[:first]), "the first event"
rest = got[first:]
while rest.startswith(b": keep-alive\n\n"):
    rest = rest[len(b": keep-alive\n\n"):]
assert rest == sent[first:], "the rest"
PY
grep -q '"heartbeats":[1-9]' "$WORK/relay.log" && ok "the access log counts the heartbeats" || fail "heartbeats in the access log"

# The official SDKs, in a venv of their own.
VENV="$ROOT/.build/sdk-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import openai, anthropic' 2>/dev/null; then
  (python3 -m venv "$VENV" && "$VENV/bin/pip" install -q openai anthropic) >"$WORK/pip.log" 2>&1
fi
if "$VENV/bin/python" -c 'import openai, anthropic' 2>/dev/null; then
  for sdk in openai anthropic; do
    text=$(timeout 30 "$VENV/bin/python" "$HERE/sdk_read.py" "$sdk" "http://127.0.0.1:$RELAY_PORT" 2>"$WORK/$sdk.err")
    [ "$text" = "Quiet models think before they speak." ] && ok "the official $sdk SDK reads a stream with heartbeats unchanged" \
      || fail "the $sdk SDK with heartbeats" "text='$text' $(tail -n 3 "$WORK/$sdk.err")"
  done
  grep -c '"heartbeats":[1-9]' "$WORK/relay.log" | grep -q '^[3-9]' && ok "the SDKs' streams carried heartbeats too" \
    || fail "the SDKs' streams carried heartbeats"
else
  skip "the official openai and anthropic SDKs" "no PyPI: $(tail -n 1 "$WORK/pip.log")"
fi

# nginx in front, as an ingress with a 1 s read timeout; the provider is quiet for 2.5 s.
if command -v nginx >/dev/null; then
  provider 2.5 "$WORK/p2"
  relay "$PROVIDER_PORT"
  NGINX_PORT=$(free_port)
  mkdir -p "$WORK/nginx"
  cat >"$WORK/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx;
  uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass http://127.0.0.1:$RELAY_PORT;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 1s;
    }
  }
}
CONF
  nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" 2>"$WORK/nginx/start.err" &
  PIDS+=($!)
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/healthz" && break; sleep 0.05; done
  curl -sS -N "http://127.0.0.1:$NGINX_PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$BODY" >"$WORK/through.txt" 2>/dev/null
  grep -q '^data: \[DONE\]$' "$WORK/through.txt" && ok "through nginx (proxy_read_timeout 1s), a 2.5 s silence survives with heartbeats" \
    || fail "through nginx with heartbeats" "$(tail -c 200 "$WORK/through.txt")"
  curl -sS -N "http://127.0.0.1:$NGINX_PORT/quiet/v1/chat/completions" -H 'Content-Type: application/json' -d "$BODY" >"$WORK/cut.txt" 2>/dev/null
  ! grep -q '^data: \[DONE\]$' "$WORK/cut.txt" && grep -q 'upstream timed out' "$WORK/nginx/error.log" \
    && ok "through nginx without heartbeats, the same silence is cut" || fail "through nginx without heartbeats" "$(tail -c 200 "$WORK/cut.txt")"
else
  skip "nginx in front" "nginx is not installed"
fi

echo "heartbeats: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
