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
# Full RELRO (Package.swift): symbols bound at start, the global offset table read-only after.
if command -v readelf >/dev/null && [ "$(uname -s)" = Linux ]; then
  dyn=$(readelf -d "$BIN"); seg=$(readelf -l "$BIN")
  grep -q 'BIND_NOW' <<<"$dyn" && grep -q 'GNU_RELRO' <<<"$seg" && ok "linked with full RELRO (BIND_NOW, GNU_RELRO)" \
    || fail "linked with full RELRO" "$(grep -E 'FLAGS' <<<"$dyn")"
fi

# --check-config: valid with the key set; names the offending key without it.
OPENAI_API_KEY=sk-blackbox-check ANTHROPIC_API_KEY=sk-ant-blackbox-check ANTHROPIC_API_KEY_BACKUP=sk-ant-blackbox-check-2 "$BIN" --check-config "$ROOT/config.example.json" >/dev/null 2>&1 \
  && ok "--check-config accepts config.example.json" || fail "--check-config accepts config.example.json"
out=$(env -u OPENAI_API_KEY ANTHROPIC_API_KEY=sk-ant-blackbox-check ANTHROPIC_API_KEY_BACKUP=sk-ant-blackbox-check-2 "$BIN" --check-config "$ROOT/config.example.json" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'upstreams.openai.key.env' <<<"$out" && ok "--check-config names the unset key variable" \
  || fail "--check-config names the unset key variable" "rc=$rc out=$out"

# Dev mode on a free port. A proxy named in the environment (nothing listens on port 9) must not catch the relay's
# loopback traffic: the warm-up, the fake provider and --probe go direct (Sources/Upstream/Probe.swift, LoopbackURL).
DEAD_PROXY=http://127.0.0.1:9
http_proxy=$DEAD_PROXY HTTP_PROXY=$DEAD_PROXY https_proxy=$DEAD_PROXY ALL_PROXY=$DEAD_PROXY \
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
# The warm-up (Sources/RelayDev/WarmUp.swift): its three exchanges answered, logged before the relay listens.
warm=$(grep -n '"message":"warmed up' "$WORK/relay.log" | cut -d: -f1); listening=$(grep -n '"message":"relay listening"' "$WORK/relay.log" | cut -d: -f1)
[ -n "$warm" ] && [ "$warm" -lt "$listening" ] && grep -q '"exchanges":3,"succeeded":3' "$WORK/relay.log" \
  && ok "the warm-up served its three exchanges before the relay listened" || fail "warm-up before listening" "$(head -n 5 "$WORK/relay.log")"
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
http_proxy=$DEAD_PROXY ALL_PROXY=$DEAD_PROXY "$BIN" --probe "http://127.0.0.1:$port/healthz" >/dev/null \
  && ok "--probe /healthz exits 0 with a proxy in the environment" || fail "--probe /healthz with a proxy in the environment"
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

# Offline App Attest checks on real Apple vectors (Tests/AttestationTests/Fixtures, see SOURCE.txt).
FIX="$ROOT/Tests/AttestationTests/Fixtures"
IOS_APP=6MURL8TA57.de.vincent-haupert.apple-appattest-poc
IOS_KEY=YmbJO4x5nEHUvncp9zdWuVZjNBEMgJn3cdSToAXQe3M=
IOS_HASH=i+ZcylFa0JfJU5Z9GNY12G3XihQu09B3UmvtEca+xns=
IOS_PUB=BIjANKGQqn28WgYVAcZUKAOUJYIZiz8cxUZzyjua0gtBUoJnpU9f26BGn6+0a7aZCjlr8E+UpJ1DIMgcerJAo5g=
APPLE_ARGS=(--app-id 1234567890.com.example.myapp --key-id zgSY9YSD+7TaDXssY6WlOPVS1K3Lmk+pFhlcSWE+ZV0=
            --client-data-hash ZXhhbXBsZV9zZXJ2ZXJfY2hhbGxlbmdl)
attest() { out=$("$BIN" "$@" 2>"$WORK/attest.err"); rc=$?; }
attest --verify-app-attest "$FIX/ios-14.4-attestation.b64" --app-id "$IOS_APP" --key-id "$IOS_KEY" --client-data-hash "$IOS_HASH" \
  --development --at 2021-01-23T12:13:33Z
[ $rc -eq 0 ] && [ "$out" = "{\"valid\":true,\"keyId\":\"$IOS_KEY\",\"appId\":\"$IOS_APP\",\"environment\":\"development\",\"counter\":0,\"publicKey\":\"$IOS_PUB\"}" ] \
  && ok "--verify-app-attest: the iOS 14.4 attestation is valid at its time" || fail "--verify-app-attest iOS 14.4" "rc=$rc out=$out"
base64 -d "$FIX/apple-2026-attestation.b64" >"$WORK/apple-2026.cbor"
attest --verify-app-attest "$WORK/apple-2026.cbor" "${APPLE_ARGS[@]}" --at 2026-04-21T00:00:00Z
[ $rc -eq 0 ] && [ "$out" = '{"valid":true,"keyId":"zgSY9YSD+7TaDXssY6WlOPVS1K3Lmk+pFhlcSWE+ZV0=","appId":"1234567890.com.example.myapp","environment":"production","counter":0,"publicKey":"BEMyVErPMj23dEQ8qvM59W5+lcck+sLBQlnzZeJEVlCytfsoW89Um8tgWUQS52gqJCfuran7Ut/tCxqxftCfqb0="}' ] \
  && ok "--verify-app-attest: Apple's 2026 sample (raw CBOR file) is valid at its time" || fail "--verify-app-attest Apple 2026" "rc=$rc out=$out"
# One byte changed at the end of authData (inside the bytes iOS 27 appends after the COSE key).
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[-1]^=1; open(sys.argv[2],"wb").write(b)' "$WORK/apple-2026.cbor" "$WORK/tampered.cbor"
attest --verify-app-attest "$WORK/tampered.cbor" "${APPLE_ARGS[@]}" --at 2026-04-21T00:00:00Z
[ $rc -eq 1 ] && [ "$out" = '{"valid":false,"reason":"nonce"}' ] && ok "--verify-app-attest: a tampered attestation exits 1 and names the step" \
  || fail "--verify-app-attest tampered" "rc=$rc out=$out"
attest --verify-app-attest "$WORK/apple-2026.cbor" "${APPLE_ARGS[@]}" --at 2026-04-24T00:00:00+02:00
[ $rc -eq 1 ] && [ "$out" = '{"valid":false,"reason":"certificate_validity"}' ] && ok "--verify-app-attest: outside the leaf's validity exits 1" \
  || fail "--verify-app-attest outside validity" "rc=$rc out=$out"
attest --verify-app-attest "$FIX/ios-14.4-attestation.b64" --app-id "OTHERTEAM.de.vincent-haupert.apple-appattest-poc" --key-id "$IOS_KEY" \
  --client-data-hash "$IOS_HASH" --development --at 2021-01-23T12:13:33Z
[ $rc -eq 1 ] && [ "$out" = '{"valid":false,"reason":"app_id"}' ] && ok "--verify-app-attest: the wrong app id exits 1" || fail "--verify-app-attest wrong app id" "rc=$rc out=$out"
attest --verify-app-attest "$FIX/ios-14.4-attestation.b64" --app-id "$IOS_APP" --key-id "$IOS_KEY" --client-data-hash "$IOS_HASH" --at 2021-01-23T12:13:33Z
[ $rc -eq 1 ] && [ "$out" = '{"valid":false,"reason":"aaguid"}' ] && ok "--verify-app-attest: a development key checked as production exits 1" \
  || fail "--verify-app-attest environment" "rc=$rc out=$out"
attest --verify-app-attest-assertion "$FIX/ios-14.4-assertion.b64" --public-key "$IOS_PUB" --app-id "$IOS_APP" --client-data-hash "$IOS_HASH"
[ $rc -eq 0 ] && [ "$out" = '{"valid":true,"counter":1}' ] && ok "--verify-app-attest-assertion: the iOS 14.4 assertion is valid" \
  || fail "--verify-app-attest-assertion" "rc=$rc out=$out"
attest --verify-app-attest-assertion "$FIX/ios-14.4-assertion.b64" --public-key "$IOS_PUB" --app-id "$IOS_APP" --client-data-hash "$IOS_HASH" --counter-above 1
[ $rc -eq 1 ] && [ "$out" = '{"valid":false,"reason":"counter"}' ] && ok "--verify-app-attest-assertion: --counter-above 1 refuses counter 1" \
  || fail "--verify-app-attest-assertion --counter-above" "rc=$rc out=$out"
attest --verify-app-attest-assertion "$FIX/ios-14.4-assertion.b64" --public-key "$IOS_PUB" --app-id "$IOS_APP" --client-data-hash "$IOS_KEY"
[ $rc -eq 1 ] && [ "$out" = '{"valid":false,"reason":"signature"}' ] && ok "--verify-app-attest-assertion: other client data exits 1" \
  || fail "--verify-app-attest-assertion other client data" "rc=$rc out=$out"
for bad in "--verify-app-attest $FIX/ios-14.4-attestation.b64 --app-id $IOS_APP --client-data-hash $IOS_HASH" \
           "--verify-app-attest $FIX/ios-14.4-attestation.b64 --app-id $IOS_APP --key-id $IOS_KEY --client-data-hash $IOS_HASH --at yesterday" \
           "--verify-app-attest $WORK/missing --app-id $IOS_APP --key-id $IOS_KEY --client-data-hash $IOS_HASH" \
           "--verify-app-attest-assertion $FIX/ios-14.4-assertion.b64 --public-key ??? --app-id $IOS_APP --client-data-hash $IOS_HASH" \
           "--verify-app-attest-assertion $FIX/ios-14.4-assertion.b64 --public-key $IOS_PUB --app-id $IOS_APP --client-data-hash $IOS_HASH --bogus" \
           "--verify-app-attest $FIX/ios-14.4-attestation.b64 --app-id bad\"id --key-id $IOS_KEY --client-data-hash $IOS_HASH"; do
  # shellcheck disable=SC2086
  attest $bad
  [ $rc -eq 2 ] && [ -z "$out" ] && grep -q 'Usage:' "$WORK/attest.err" && ok "App Attest bad arguments exit 2: ${bad:0:60}…" \
    || fail "App Attest bad arguments exit 2: $bad" "rc=$rc out=$out"
done

echo "blackbox: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
