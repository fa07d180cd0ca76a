#!/usr/bin/env bash
# Smoke test of a deployed relay: streams one chat completion with `curl -N` and fails unless the events arrive
# progressively (a buffering proxy in between delivers them all at once at the end).
#
# Usage: deploy/smoke.sh URL [TOKEN]
#   URL    the relay's base URL (http://127.0.0.1:8080) or the full .../chat/completions URL
#   TOKEN  sent as `Authorization: Bearer TOKEN` when given (for a relay or ingress that checks clients)
# Environment: MODEL (gpt-4o-mini), PROMPT, MIN_EVENTS (3), MIN_SPREAD_MS (100), MAX_TIME (120 s),
#              CURL_OPTS (extra curl options, e.g. "--cacert ca.pem").
# Exit 0 when it passes, 1 when a check fails, 2 on usage errors.
set -uo pipefail

URL=${1:-}
TOKEN=${2:-}
if [ -z "$URL" ] || [ "$URL" = "-h" ] || [ "$URL" = "--help" ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 2
fi
case "$URL" in
  */chat/completions) ;;
  *) URL="${URL%/}/v1/chat/completions" ;;
esac
MODEL=${MODEL:-gpt-4o-mini}
PROMPT=${PROMPT:-Count from 1 to 20, one number per line, nothing else.}
MIN_EVENTS=${MIN_EVENTS:-3}
MIN_SPREAD_MS=${MIN_SPREAD_MS:-100}
MAX_TIME=${MAX_TIME:-120}

command -v curl >/dev/null || { echo "smoke: curl is needed" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Microseconds since the epoch, without forking when the shell can (bash 5: EPOCHREALTIME).
now_us() {
  if [ -n "${EPOCHREALTIME:-}" ]; then local t=${EPOCHREALTIME/[.,]/}; echo "$t"
  else echo $(( $(date +%s%N) / 1000 )); fi
}

json_escape() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '%s' "$s"; }
BODY="{\"model\":\"$(json_escape "$MODEL")\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"$(json_escape "$PROMPT")\"}]}"

args=(-sS -N --max-time "$MAX_TIME" -D "$WORK/headers" -H 'Content-Type: application/json' -H 'Accept: text/event-stream'
      --data-binary "$BODY")
[ -n "$TOKEN" ] && args+=(-H "Authorization: Bearer $TOKEN")
# shellcheck disable=SC2206
[ -n "${CURL_OPTS:-}" ] && args+=($CURL_OPTS)

echo "smoke: POST $URL (model $MODEL, stream)"
start=$(now_us)
# One timestamp per line as it comes out of curl (-N: no output buffering).
curl "${args[@]}" "$URL" 2>"$WORK/curl.err" | while IFS= read -r line || [ -n "$line" ]; do
  printf '%s %s\n' "$(now_us)" "${line%$'\r'}"
done >"$WORK/lines"
curl_rc=${PIPESTATUS[0]}
end=$(now_us)

status=$(awk 'toupper($1) ~ /^HTTP\// {s=$2} END {print s}' "$WORK/headers" 2>/dev/null)
ctype=$(awk 'tolower($1)=="content-type:" {sub(/\r$/,""); $1=""; sub(/^ /,""); print}' "$WORK/headers" 2>/dev/null | tail -n 1)
reqid=$(awk 'tolower($1)=="x-request-id:" {sub(/\r$/,""); print $2}' "$WORK/headers" 2>/dev/null | tail -n 1)
grep ' data: ' "$WORK/lines" >"$WORK/events" || true
grep -v ' data: \[DONE\]' "$WORK/events" >"$WORK/payload" || true
events=$(wc -l <"$WORK/payload" | tr -d ' ')
done_seen=no; grep -q ' data: \[DONE\]$' "$WORK/events" && done_seen=yes

ms() { echo $(( $1 / 1000 )); }
first_ms=""; last_ms=""; spread_ms=0; max_gap_ms=0
if [ "$events" -gt 0 ]; then
  first=$(head -n 1 "$WORK/events" | cut -d' ' -f1); last=$(tail -n 1 "$WORK/events" | cut -d' ' -f1)
  first_ms=$(ms $((first - start))); last_ms=$(ms $((last - start))); spread_ms=$(ms $((last - first)))
  max_gap_ms=$(awk 'NR>1 {g=$1-p; if (g>m) m=g} {p=$1} END {printf "%d", m/1000}' "$WORK/events")
fi

echo "smoke: status ${status:-none}, content-type ${ctype:-none}, x-request-id ${reqid:-none}, curl exit $curl_rc"
echo "smoke: $events data events (+[DONE]: $done_seen); first after ${first_ms:-?} ms, last after ${last_ms:-?} ms," \
     "spread ${spread_ms} ms, longest gap ${max_gap_ms} ms, total $(ms $((end - start))) ms"

problems=()
[ "$curl_rc" -eq 0 ] || problems+=("curl failed (exit $curl_rc): $(head -c 300 "$WORK/curl.err")")
[ "$status" = "200" ] || problems+=("status ${status:-none}, want 200: $(cut -d' ' -f2- "$WORK/lines" | head -c 400)")
case "$ctype" in text/event-stream*) ;; *) problems+=("content-type '${ctype}', want text/event-stream") ;; esac
[ "$events" -ge "$MIN_EVENTS" ] || problems+=("only $events data events, want at least $MIN_EVENTS")
[ "$done_seen" = yes ] || problems+=("no 'data: [DONE]': the stream did not end cleanly")
if [ "$events" -ge 2 ] && [ "$spread_ms" -lt "$MIN_SPREAD_MS" ]; then
  problems+=("first to last event only ${spread_ms} ms apart (want >= $MIN_SPREAD_MS): events arrived in one burst, something buffers the stream")
fi

if [ ${#problems[@]} -eq 0 ]; then
  echo "smoke: PASS: events arrived progressively"
  exit 0
fi
for p in "${problems[@]}"; do echo "smoke: FAIL: $p"; done
exit 1
