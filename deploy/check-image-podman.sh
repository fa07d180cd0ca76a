#!/usr/bin/env bash
# Builds the Dockerfile's runtime stage with a real image builder (podman/buildah) and runs the image with a real
# OCI runtime, on a machine whose registries are only Debian's and PyPI (no Docker Hub):
#   - the base debian:bookworm-slim is made locally: debootstrap --variant=minbase bookworm, then podman import;
#   - the build stage (swift:6.0-bookworm) is not available, so it is replaced by a stub stage holding a binary
#     built by deploy/check-image-steps.sh (same commands, outside a container); the runtime stage is used verbatim;
#   - the image is run as Compose would run it: config and key mounted read-only, read-only root, tmpfs /tmp,
#     cap-drop ALL, no-new-privileges; host network, listening on 127.0.0.1 only, a fake provider on 127.0.0.1.
# Checks: ldd inside the image, image metadata, the image's HEALTHCHECK (podman healthcheck run), deploy/smoke.sh,
# the start-up warm-up's log line, and `podman stop` with a stream in flight (drained, exit code 0).
#
# Usage: deploy/check-image-podman.sh   (root; installs podman, runc, debootstrap if missing; ~3 min the first time)
# Environment: SSE_RELAY_BIN (default: the binary check-image-steps.sh built), WORK (/tmp/build-deploy-podman),
#   PODMAN_FLAGS (default: "--storage-driver vfs --cgroup-manager cgroupfs --runtime runc", which work inside a
#   container sandbox; set it empty on a normal machine), DEBIAN_MIRROR (from the apt sources).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/build-deploy-podman}
BIN=${SSE_RELAY_BIN:-/tmp/build-deploy-image/context/.build/release/sse-relay}
PODMAN_FLAGS=${PODMAN_FLAGS---storage-driver vfs --cgroup-manager cgroupfs --runtime runc}
BASE=localhost/debian:bookworm-slim
IMAGE=localhost/sse-relay:check
NAME=sse-relay-check
passed=0; failed=0
ok()   { passed=$((passed+1)); echo "ok      - $1"; }
fail() { failed=$((failed+1)); echo "FAIL    - $1"; [ -n "${2:-}" ] && printf '          %s\n' "$2"; return 0; }
summary() { echo; echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
mkdir -p "$WORK"
# No default ulimits: a sandbox may not allow raising them (the relay does not need it here).
printf '[containers]\ndefault_ulimits = []\n' >"$WORK/containers.conf"
export CONTAINERS_CONF=$WORK/containers.conf
# shellcheck disable=SC2086
pm() { podman $PODMAN_FLAGS "$@"; }
UPSTREAM=""
cleanup() { pm rm -f -t 0 "$NAME" >/dev/null 2>&1; [ -n "$UPSTREAM" ] && kill "$UPSTREAM" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 2; }
[ -x "$BIN" ] || { fail "a release binary at $BIN (run deploy/check-image-steps.sh first, or set SSE_RELAY_BIN)"; summary; }
missing=(); for p in podman runc debootstrap; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { fail "apt-get install ${missing[*]}"; summary; }
fi
ok "podman $(podman --version | awk '{print $3}'), runc, debootstrap"

# Base image, made locally once.
if ! pm image exists "$BASE"; then
  # Comment lines are skipped: Debian's images name a snapshot mirror in a comment above the live one.
  mirror=${DEBIAN_MIRROR:-$(grep -hvE '^[[:space:]]*#' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | grep -oE 'https?://[^ ]+/debian/?' | grep -v security | head -n 1)}
  mirror=${mirror:-http://deb.debian.org/debian}
  rm -rf "$WORK/rootfs"
  if debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
     && tar -C "$WORK/rootfs" -c . | pm import - "$BASE" >/dev/null; then
    ok "base $BASE from debootstrap --variant=minbase bookworm ($mirror)"
  else
    fail "debootstrap + podman import" "$(tail -n 5 "$WORK/debootstrap.log")"; summary
  fi
  rm -rf "$WORK/rootfs"
else
  ok "base $BASE already imported"
fi

# Containerfile: stub build stage + the Dockerfile's runtime stage, verbatim but for its FROM.
CTX=$WORK/context; rm -rf "$CTX"; mkdir -p "$CTX"; cp "$BIN" "$CTX/sse-relay"
{
  echo "FROM $BASE AS build"
  echo "COPY sse-relay /out/sse-relay"
  # the last stage of the Dockerfile, from its FROM line on
  awk -v last="$(grep -c '^FROM ' "$ROOT/Dockerfile")" '/^FROM /{n++} n == last' "$ROOT/Dockerfile" | sed -E "1s|^FROM .*|FROM $BASE|"
} >"$CTX/Containerfile"
if pm build --format docker --isolation chroot --network host -t "$IMAGE" -f "$CTX/Containerfile" "$CTX" >"$WORK/build.log" 2>&1; then
  ok "podman build of the runtime stage ($(pm image inspect "$IMAGE" --format '{{.Size}}' | awk '{printf "%d MB", $1/1000000}'))"
else
  fail "podman build of the runtime stage" "$(tail -n 15 "$WORK/build.log")"; summary
fi

meta=$(pm image inspect "$IMAGE" --format '{{.Config.User}}|{{.Config.StopSignal}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}|{{json .Config.ExposedPorts}}|{{json .Config.Healthcheck.Test}}')
IFS='|' read -r user stopsig entry cmd ports health <<<"$meta"
[ "$user" = 10001:10001 ] && ok "image user 10001:10001" || fail "image user" "$user"
[ "$stopsig" = SIGTERM ] && ok "image stop signal SIGTERM" || fail "image stop signal" "$stopsig"
[ "$entry" = '["/usr/local/bin/sse-relay"]' ] && [ "$cmd" = '["--config","/etc/sse-relay/config.json"]' ] \
  && ok "entrypoint $entry, cmd $cmd" || fail "entrypoint/cmd" "$entry $cmd"
grep -q '8080/tcp' <<<"$ports" && grep -q '9090/tcp' <<<"$ports" && ok "exposes $ports" || fail "exposed ports" "$ports"
grep -q -- '--probe' <<<"$health" && ok "healthcheck kept in the image: $health" || fail "healthcheck in the image" "$health"

inside=$(pm run --rm --network host --entrypoint /bin/sh "$IMAGE" -c 'ldd /usr/local/bin/sse-relay; echo "uid=$(id -u)"; ls /etc/ssl/certs/ca-certificates.crt' 2>&1)
if grep -q 'not found' <<<"$inside"; then fail "ldd inside the image: every library resolves" "$(grep 'not found' <<<"$inside")"
else ok "ldd inside the image: all $(grep -c '=>' <<<"$inside") libraries resolve"; fi
grep -q '^/etc/ssl/certs/ca-certificates.crt$' <<<"$inside" && ok "CA bundle present" || fail "CA bundle present" "$inside"

# Run it as Compose would.
rm -f "$WORK/upstream.port"
python3 "$ROOT/deploy/testing/fake-upstream.py" "$WORK/openai.key" "$WORK/upstream.port" &
UPSTREAM=$!
SECRET="sk-podman-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
CLIENT_TOKEN="app-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"   # what a mobile app sends
printf '%s\n' "$SECRET" >"$WORK/openai.key"; chown 0:10001 "$WORK/openai.key"; chmod 0440 "$WORK/openai.key"
for _ in $(seq 1 50); do [ -s "$WORK/upstream.port" ] && break; sleep 0.1; done
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port); ADMIN=$(free_port)
python3 - "$ROOT/deploy/config.compose.json" "$WORK/config.json" "$(cat "$WORK/upstream.port")" "$PORT" "$ADMIN" "$CLIENT_TOKEN" <<'EOF'
import hashlib, json, sys
src, dst, uport, port, admin, token = sys.argv[1:]
c = json.load(open(src))
c["listen"] = {"host": "127.0.0.1", "port": int(port)}
c["admin"] = {"host": "127.0.0.1", "port": int(admin)}
for u in c["upstreams"].values():
    u["baseURL"] = "http://127.0.0.1:%s" % uport
if "tokens" in c.get("clients", {}):
    c["clients"]["tokens"] = [{"id": "check", "sha256": hashlib.sha256(token.encode()).hexdigest()}]
c["timeouts"]["drainSeconds"] = 5
json.dump(c, open(dst, "w"))
EOF
chmod 0644 "$WORK/config.json"
pm rm -f -t 0 "$NAME" >/dev/null 2>&1
if pm run -d --name "$NAME" --network host --read-only --tmpfs /tmp:size=16m --cap-drop ALL \
     --security-opt no-new-privileges -e SSE_RELAY_PORT="$PORT" \
     -v "$WORK/config.json:/etc/sse-relay/config.json:ro" -v "$WORK/openai.key:/run/secrets/openai:ro" \
     "$IMAGE" >/dev/null 2>"$WORK/run.err"; then
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
  ok "podman run (read-only root, cap-drop ALL, no-new-privileges, config and key mounted read-only)"
else
  fail "podman run" "$(cat "$WORK/run.err")"; summary
fi
pm healthcheck run "$NAME" >"$WORK/health.out" 2>&1 && ok "podman healthcheck run: the image's HEALTHCHECK passes" \
  || fail "podman healthcheck run" "$(cat "$WORK/health.out"; pm logs "$NAME" 2>&1 | tail -n 5)"
smoke=$("$ROOT/deploy/smoke.sh" "http://127.0.0.1:$PORT" "$CLIENT_TOKEN" 2>&1) && ok "deploy/smoke.sh: $(grep -o '[0-9]* data events.*spread [0-9]* ms' <<<"$smoke")" \
  || fail "deploy/smoke.sh against the container" "$smoke"
logs=$(pm logs "$NAME" 2>&1)
grep -qF -e "$SECRET" -e "$CLIENT_TOKEN" <<<"$logs" && fail "the key never appears in the container's logs" || ok "the key never appears in the container's logs"
grep -q '"message":"warmed up[^"]*","exchanges":3,"succeeded":3' <<<"$logs" \
  && ok "the start-up warm-up served its three exchanges inside the container (read-only root, no capabilities)" \
  || fail "the start-up warm-up inside the container" "$(grep -i 'warm' <<<"$logs" | head -n 2)"

curl -sS -N --max-time 20 "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -H "Authorization: Bearer $CLIENT_TOKEN" \
  -d '{"model":"slow","stream":true,"messages":[]}' >"$WORK/inflight.txt" 2>&1 &
CURL=$!
for _ in $(seq 1 50); do grep -q '^data: ' "$WORK/inflight.txt" && break; sleep 0.05; done
t0=$(date +%s)
pm stop -t 45 "$NAME" >/dev/null 2>&1
wait "$CURL"
code=$(pm inspect "$NAME" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] && ok "podman stop: exit code 0 after $(( $(date +%s) - t0 )) s" || fail "podman stop: exit code 0" "exit code $code; $(pm logs "$NAME" 2>&1 | tail -n 3)"
grep -q '^data: \[DONE\]' "$WORK/inflight.txt" && ok "the in-flight stream finished during the stop ($(grep -c '^data: ' "$WORK/inflight.txt") events)" \
  || fail "the in-flight stream finishes during the stop" "$(tail -n 2 "$WORK/inflight.txt")"
summary
