#!/usr/bin/env bash
# Black-box checks of the built binary, the way a person uses it: flags, --check-config, and dev mode driven
# with `curl -N`, including `| head -n 3` (the client leaves mid-stream: the relay must cancel and live on).
# Usage: Tests/blackbox/run.sh PATH/TO/sse-relay
set -u
BIN=${1:?usage: run.sh PATH/TO/sse-relay}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
PID=""
passed=0; failed=0
ok()   { passed=$((passed+1)); echo "ok   - $1"; }
fail() { failed=$((failed+1)); echo "FAIL - $1"; [ -n "${2:-}" ] && echo "       $2"; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

"$BIN" --version | grep -q '^sse-relay [0-9]' && ok "--version" || fail "--version"
"$BIN" --help | grep -q -- '--check-config' && ok "--help lists --check-config" || fail "--help"
"$BIN" --bogus >/dev/null 2>&1; [ $? -eq 2 ] && ok "unknown flag exits 2" || fail "unknown flag exits 2"

# --check-config: valid with the key set; names the offending key without it.
OPENAI_API_KEY=sk-blackbox-check ANTHROPIC_API_KEY=sk-ant-blackbox-check "$BIN" --check-config "$ROOT/config.example.json" >/dev/null 2>&1 \
  && ok "--check-config accepts config.example.json" || fail "--check-config accepts config.example.json"
out=$(env -u OPENAI_API_KEY ANTHROPIC_API_KEY=sk-ant-blackbox-check "$BIN" --check-config "$ROOT/config.example.json" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'upstreams.openai.key.env' <<<"$out" && ok "--check-config names the unset key variable" \
  || fail "--check-config names the unset key variable" "rc=$rc out=$out"

# Dev mode on a free port.
"$BIN" --dev --port 0 --dev-pace-ms 40 >"$WORK/relay.log" 2>&1 &
PID=$!
port=""
for _ in $(seq 1 100); do
  port=$(grep -o '"message":"relay listening"[^}]*"port":[0-9]*' "$WORK/relay.log" 2>/dev/null | grep -o '"port":[0-9]*' | cut -d: -f2)
  [ -n "$port" ] && break
  sleep 0.05
done
if [ -z "$port" ]; then fail "dev mode starts"; cat "$WORK/relay.log"; echo "$passed passed, $((failed)) failed"; exit 1; fi
ok "dev mode starts (port $port)"
URL="http://127.0.0.1:$port/v1/chat/completions"
BODY='{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}'

# The README's curl, cut short by head: three lines, then the client is gone.
lines=$(curl -sS -N "$URL" -H 'Content-Type: application/json' -d "$BODY" | head -n 3)
[ "$(grep -c '^data: ' <<<"$lines")" -eq 2 ] && ok "curl -N | head -n 3 gets the first events" || fail "curl -N | head -n 3" "$lines"
for _ in $(seq 1 100); do grep -q '"outcome":"client_cancelled"' "$WORK/relay.log" && break; sleep 0.05; done
grep -q '"outcome":"client_cancelled"' "$WORK/relay.log" && ok "the relay logs the early exit as client_cancelled" \
  || fail "client_cancelled logged"
kill -0 "$PID" 2>/dev/null && ok "the relay is still running after the client left" || fail "relay survived SIGPIPE"

# Progressive delivery: the first event arrives long before the last (17 tokens at 40 ms).
curl -sS -N "$URL" -H 'Content-Type: application/json' -d "$BODY" \
  | while IFS= read -r line; do [ -n "$line" ] && echo "$(date +%s%N) $line"; done >"$WORK/stream.txt"
first=$(head -n 1 "$WORK/stream.txt" | cut -d' ' -f1); last=$(tail -n 1 "$WORK/stream.txt" | cut -d' ' -f1)
spread_ms=$(( (last - first) / 1000000 ))
[ "$spread_ms" -ge 400 ] && ok "events arrive progressively (first to last: ${spread_ms} ms)" || fail "progressive delivery" "spread ${spread_ms} ms"
tail -n 1 "$WORK/stream.txt" | grep -q 'data: \[DONE\]' && ok "stream ends with [DONE]" || fail "stream ends with [DONE]"
[ "$(grep -c 'chat.completion.chunk' "$WORK/stream.txt")" -eq 18 ] && ok "18 chunks relayed" || fail "18 chunks relayed"

# Non-streaming, 404, and the key never leaving the server.
curl -sS -i "$URL" -H 'Content-Type: application/json' -d '{"model":"gpt-4o-mini","messages":[]}' >"$WORK/plain.txt"
grep -q '"object":"chat.completion"' "$WORK/plain.txt" && grep -qi '^content-length:' "$WORK/plain.txt" \
  && ok "non-streaming answer with Content-Length" || fail "non-streaming answer"
curl -sS -i "http://127.0.0.1:$port/elsewhere" >"$WORK/404.txt"
head -n 1 "$WORK/404.txt" | grep -q ' 404 ' && grep -q '"code":"route_not_found"' "$WORK/404.txt" \
  && ok "unknown path: 404 with a JSON error" || fail "404"
if cat "$WORK"/*.txt | grep -q 'dev-key-not-secret'; then fail "the provider key reached a client"; else ok "no response carries the provider key"; fi
if grep -q 'dev-key-not-secret' "$WORK/relay.log"; then fail "the provider key reached the log"; else ok "the log does not carry the provider key"; fi

# Built-in endpoints and the probe a container health check uses.
"$BIN" --probe "http://127.0.0.1:$port/healthz" >/dev/null && ok "--probe /healthz exits 0" || fail "--probe /healthz"
"$BIN" --probe "http://127.0.0.1:$port/nowhere" >/dev/null; [ $? -eq 1 ] && ok "--probe on a 404 exits 1" || fail "--probe on a 404"
curl -sS "http://127.0.0.1:$port/metrics" | grep -q '^sse_relay_requests_total{route="/v1/",status="200",outcome="completed"}' \
  && ok "/metrics counts the completed exchanges" || fail "/metrics"

# SIGTERM while a stream is in flight: the stream finishes cleanly, new connections are refused, exit 0.
curl -sS -N "$URL" -H 'Content-Type: application/json' -d "$BODY" >"$WORK/drain.txt" &
CURL_PID=$!
for _ in $(seq 1 100); do grep -q 'chat.completion.chunk' "$WORK/drain.txt" 2>/dev/null && break; sleep 0.02; done
kill -TERM "$PID"
for _ in $(seq 1 100); do grep -q '"message":"draining"' "$WORK/relay.log" && break; sleep 0.02; done
curl -sS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && fail "a new connection was accepted while draining" || ok "new connections are refused while draining"
wait "$CURL_PID"; crc=$?
[ $crc -eq 0 ] && tail -n 2 "$WORK/drain.txt" | grep -q 'data: \[DONE\]' && ok "the in-flight stream completed during the drain" \
  || fail "in-flight stream during drain" "curl rc=$crc, tail: $(tail -c 200 "$WORK/drain.txt")"
wait "$PID"; rc=$?; PID=""
[ $rc -eq 0 ] && ok "SIGTERM exits 0 after the drain" || fail "SIGTERM exits 0" "rc=$rc"

# Environment overrides apply over the file.
cat >"$WORK/env.json" <<JSON
{ "listen": {"host": "127.0.0.1", "port": 1}, "upstreams": {"u": {"baseURL": "http://127.0.0.1:9"}},
  "routes": [{"prefix": "/v1/", "upstream": "u", "auth": "none"}] }
JSON
free=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SSE_RELAY_PORT=$free SSE_RELAY_LOG_LEVEL=warning "$BIN" --config "$WORK/env.json" >"$WORK/env.log" 2>&1 &
PID=$!
up=no
for _ in $(seq 1 100); do "$BIN" --probe "http://127.0.0.1:$free/healthz" >/dev/null 2>&1 && { up=yes; break; }; sleep 0.02; done
[ $up = yes ] && ok "SSE_RELAY_PORT overrides the file's port" || fail "SSE_RELAY_PORT override" "$(cat "$WORK/env.log")"
! grep -q '"level":"info"' "$WORK/env.log" && ok "SSE_RELAY_LOG_LEVEL=warning hides info lines" || fail "SSE_RELAY_LOG_LEVEL override"
kill -TERM "$PID"; wait "$PID"; PID=""
SSE_RELAY_PORT=abc "$BIN" --check-config "$WORK/env.json" >/dev/null 2>"$WORK/env.err"; rc=$?
[ $rc -eq 1 ] && grep -q 'SSE_RELAY_PORT' "$WORK/env.err" && ok "a bad SSE_RELAY_PORT is named by --check-config" || fail "bad SSE_RELAY_PORT"

echo "blackbox: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
