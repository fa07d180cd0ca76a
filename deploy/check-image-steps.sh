#!/usr/bin/env bash
# Runs the Dockerfile's steps outside a container (this machine has a Docker client but no engine), on Debian 12
# as root, and checks what the image would do:
#   1. the Dockerfile itself: stages, non-root USER, EXPOSE, HEALTHCHECK, STOPSIGNAL, ENTRYPOINT, nothing baked in;
#   2. the build context as .dockerignore makes it (copied to a scratch dir; .git, .build, keys stay out);
#   3. the build stage: its apt-get packages, then its `swift ...` commands, verbatim, in that copy;
#   4. the runtime stage: every shared library the release binary needs (readelf NEEDED, ldd) comes from the
#      packages of the runtime `apt-get install` line (parsed from the Dockerfile, so the two cannot drift) or
#      from the base image (Essential packages and apt);
#   5. the binary as in the container: PID 1 of its own PID namespace, uid/gid 10001, no capabilities,
#      no_new_privs, read-only root with a tmpfs /tmp, config and key mounted read-only; a fake provider on
#      127.0.0.1 checks the key; /healthz, /readyz, /metrics, HEALTHCHECK, deploy/smoke.sh, SIGTERM drain.
# Checks of features added to the relay over time (health endpoints, admin listener, SSE_RELAY_* overrides,
# drain) fail like any other; STRICT=0 reports them as "pending" and counts them as skipped instead, for
# checking an older binary (SSE_RELAY_BIN) that predates them.
#
# Usage: deploy/check-image-steps.sh            (as root; first run builds from scratch: several minutes)
# Environment: WORK (/tmp/build-deploy-image), SSE_RELAY_BIN (test this binary, skip the build steps),
#              STRICT=0, CLEAN=1 (drop the build cache in WORK), SWIFT (swift; /opt/swift/usr/bin is on PATH).
# Ends with "N passed, N failed, N skipped"; exits 1 if anything failed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DOCKERFILE=$ROOT/Dockerfile
DOCKERIGNORE=$ROOT/.dockerignore
WORK=${WORK:-/tmp/build-deploy-image}
CTX=$WORK/context
ROOTFS=$WORK/rootfs
STRICT=${STRICT:-1}
export PATH="/opt/swift/usr/bin:$PATH"
SWIFT=${SWIFT:-swift}

passed=0; failed=0; skipped=0
ok()      { passed=$((passed+1)); echo "ok      - $1"; }
fail()    { failed=$((failed+1)); echo "FAIL    - $1"; [ -n "${2:-}" ] && printf '          %s\n' "$2"; return 0; }
skip()    { skipped=$((skipped+1)); echo "skip    - $1"; [ -n "${2:-}" ] && printf '          %s\n' "$2"; return 0; }
pending() { if [ "$STRICT" != 0 ]; then fail "$1" "${2:-}"; else skipped=$((skipped+1)); echo "pending - $1"; [ -n "${2:-}" ] && printf '          %s\n' "$2"; fi; return 0; }
section() { echo; echo "## $1"; }
summary() { echo; echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

# ---------------------------------------------------------------------------------------------------------------
# Dockerfile parsing: one instruction per line (continuations joined, comments dropped), split by stage.
logical_lines() {
  awk '
    /^[[:space:]]*#/ { next }
    { line = $0
      if (sub(/\\[[:space:]]*$/, "", line)) { buf = buf line " "; next }
      buf = buf line
      if (buf ~ /[^[:space:]]/) { gsub(/[[:space:]]+/, " ", buf); sub(/^ /, "", buf); print buf }
      buf = "" }
  ' "$DOCKERFILE"
}
# stage NAME | stage last: that stage's instructions, FROM included.
stage() {
  logical_lines | awk -v want="$1" '
    toupper($1) == "FROM" { n++; names[n] = ""; for (i = 2; i < NF; i++) if (toupper($i) == "AS") names[n] = $(i+1) }
    n > 0 { text[n] = text[n] $0 "\n" }
    END { for (i = 1; i <= n; i++) if ((want == "last" && i == n) || names[i] == want) printf "%s", text[i] }'
}
# Package names of the stage's `apt-get install` commands (options dropped).
apt_packages() {
  grep -E '^RUN ' | grep -oE 'apt-get install[^&;|]*' | sed 's/^apt-get install//' | tr ' ' '\n' | grep -vE '^(-.*|)$' | sort -u
}
# The stage's RUN commands split at `&&`, one per line.
run_commands() {
  grep -E '^RUN ' | sed 's/^RUN //' | awk '{ n = split($0, parts, "&&"); for (i = 1; i <= n; i++) { p = parts[i]; sub(/^ +/, "", p); sub(/ +$/, "", p); print p } }'
}

section "Dockerfile"
[ -f "$DOCKERFILE" ] || { fail "Dockerfile exists at $DOCKERFILE"; summary; }
BUILD_STAGE=$(stage build)
RUNTIME_STAGE=$(stage last)
[ -n "$BUILD_STAGE" ] && ok "build stage 'AS build': $(head -n 1 <<<"$BUILD_STAGE")" || fail "a stage named 'build'"
FROM_LINES=$(logical_lines | grep -E '^FROM ')
args_default() { logical_lines | sed -n "s/^ARG $1=//p" | head -n 1; }
if grep -q 'swift:6' <<<"$(args_default SWIFT_IMAGE) $FROM_LINES" && grep -q 'debian:bookworm-slim' <<<"$(args_default RUNTIME_IMAGE) $FROM_LINES"; then
  ok "bases: $(args_default SWIFT_IMAGE) (build), $(args_default RUNTIME_IMAGE) (runtime)"
else
  fail "bases are swift:6.x and debian:bookworm-slim" "$FROM_LINES"
fi
BUILD_PACKAGES=$(apt_packages <<<"$BUILD_STAGE" | xargs)
RUNTIME_PACKAGES=$(apt_packages <<<"$RUNTIME_STAGE" | xargs)
[ -n "$BUILD_PACKAGES" ] && ok "build stage apt-get install: $BUILD_PACKAGES" || fail "build stage installs its packages with apt-get install"
[ -n "$RUNTIME_PACKAGES" ] && ok "runtime stage apt-get install: $RUNTIME_PACKAGES" || fail "runtime stage installs its packages with apt-get install"
BUILD_COMMANDS=$(run_commands <<<"$BUILD_STAGE" | grep -E '^swift ')
grep -qE '^swift build .*--build-tests' <<<"$BUILD_COMMANDS" && grep -qE '^swift test' <<<"$BUILD_COMMANDS" \
  && ok "build stage runs the tests" || fail "build stage runs 'swift build --build-tests' and 'swift test'" "$BUILD_COMMANDS"
grep -qE '^swift build .*-c release.*--static-swift-stdlib' <<<"$BUILD_COMMANDS" \
  && ok "build stage builds the release binary with --static-swift-stdlib" || fail "release build with --static-swift-stdlib" "$BUILD_COMMANDS"

user=$(grep -E '^USER ' <<<"$RUNTIME_STAGE" | tail -n 1 | awk '{print $2}')
uid=${user%%:*}; gid=${user#*:}; [ "$gid" = "$user" ] && gid=$uid
if [[ "$uid" =~ ^[0-9]+$ ]] && [ "$uid" -ne 0 ] && [[ "$gid" =~ ^[0-9]+$ ]]; then
  ok "runtime USER is a fixed non-root uid:gid ($uid:$gid)"
  grep -qE "useradd .*--uid $uid" <<<"$RUNTIME_STAGE" && grep -qE "groupadd .*--gid $gid" <<<"$RUNTIME_STAGE" \
    && ok "the image has a passwd/group entry for $uid:$gid" || fail "useradd --uid $uid / groupadd --gid $gid in the runtime stage"
else
  fail "runtime USER is a numeric non-root uid (got '${user:-none}')"; uid=10001; gid=10001
fi
grep -qE '^EXPOSE .*\b8080\b' <<<"$RUNTIME_STAGE" && ok "EXPOSE 8080$(grep -qE '^EXPOSE .*\b9090\b' <<<"$RUNTIME_STAGE" && echo ' (and 9090)')" || fail "EXPOSE 8080"
grep -qE '^STOPSIGNAL SIGTERM$' <<<"$RUNTIME_STAGE" && ok "STOPSIGNAL SIGTERM" || fail "STOPSIGNAL SIGTERM"
HEALTHCHECK_CMD=$(grep -E '^HEALTHCHECK ' <<<"$RUNTIME_STAGE" | sed -E 's/^HEALTHCHECK( --[a-z-]+=[^ ]+)* CMD //')
[ -n "$HEALTHCHECK_CMD" ] && grep -q '/healthz' <<<"$HEALTHCHECK_CMD" && ok "HEALTHCHECK on /healthz: $HEALTHCHECK_CMD" || fail "HEALTHCHECK CMD ... /healthz"
ENTRY=$(grep -E '^ENTRYPOINT ' <<<"$RUNTIME_STAGE" | sed -nE 's/^ENTRYPOINT \["([^"]+)".*/\1/p')
COPY_LINES=$(grep -E '^(COPY|ADD) ' <<<"$RUNTIME_STAGE")
COPY_DEST=$(grep -E '^COPY --from=build ' <<<"$COPY_LINES" | awk '{print $NF}')
[ -n "$ENTRY" ] && [ "$ENTRY" = "$COPY_DEST" ] && ok "ENTRYPOINT exec form runs the copied binary ($ENTRY)" || fail "ENTRYPOINT [\"$COPY_DEST\"]" "got '$ENTRY'"
grep -qE '^CMD \["--config", *"/etc/sse-relay/config.json"\]' <<<"$RUNTIME_STAGE" && ok "CMD --config /etc/sse-relay/config.json (mounted)" || fail "CMD [\"--config\", \"/etc/sse-relay/config.json\"]"
if [ "$(grep -c . <<<"$COPY_LINES")" -eq 1 ] && grep -qE '^COPY --from=build /out/sse-relay ' <<<"$COPY_LINES"; then
  ok "runtime stage copies only the binary: no configuration or key baked in"
else
  fail "runtime stage copies only the binary" "$COPY_LINES"
fi
grep -qE '/out/sse-relay' <<<"$(run_commands <<<"$BUILD_STAGE")" && ok "build stage installs the binary at /out/sse-relay" || fail "build stage writes /out/sse-relay"

# ---------------------------------------------------------------------------------------------------------------
section "Build context (.dockerignore)"
mkdir -p "$CTX"
[ "${CLEAN:-0}" = 1 ] && rm -rf "$CTX/.build"
find "$CTX" -mindepth 1 -maxdepth 1 ! -name .build -exec rm -rf {} +
patterns=$(grep -vE '^[[:space:]]*(#|$)' "$DOCKERIGNORE" 2>/dev/null)
if [ "$(head -n 1 <<<"$patterns")" = "*" ]; then
  include=(); exclude=()
  while IFS= read -r p; do
    case "$p" in
      '*') ;;
      '!'*) q=${p#!}; q=${q%/}; [ -e "$ROOT/$q" ] && include+=("$q") ;;
      *) exclude+=(--exclude="${p#\*\*/}") ;;
    esac
  done <<<"$patterns"
  tar -C "$ROOT" -cf "$WORK/context.tar" "${exclude[@]}" "${include[@]}"
  ok ".dockerignore is an allowlist; context: ${include[*]} ($(tar -tf "$WORK/context.tar" | grep -vc '/$') files)"
else
  fail ".dockerignore starts with '*' (an allowlist; this check copies only what it re-includes)"
  tar -C "$ROOT" -cf "$WORK/context.tar" --exclude=.build --exclude=.git .
fi
tar -C "$CTX" -xf "$WORK/context.tar"
# What would enter the image build: no repository, build output, configuration, deploy/, keys or env files
# (test fixtures under Tests/ may hold throwaway keys; config.example.json, which the tests load, holds no secret).
leaked=$(tar -tf "$WORK/context.tar" | sed 's|^\./||' | grep -vE '^Tests/.*\.(key|pem)$|^config\.example\.json$' \
  | grep -E '^(\.git|\.build|\.swiftpm|deploy)(/|$)|^config[^/]*\.json$|\.(key|pem)$|(^|/)\.env|(^|/)openai[^/]*$' | head -n 10 | xargs)
[ -z "$leaked" ] && ok "context holds no .git, .build, configuration, deploy/ or key files" || fail "context leaks: $leaked"
missing=""
while read -r src; do [ -e "$CTX/$src" ] || missing="$missing $src"; done < <(grep -E '^COPY ' <<<"$BUILD_STAGE" | grep -v -- '--from' | awk '{for (i = 2; i < NF; i++) print $i}')
[ -z "$missing" ] && ok "every COPY source of the build stage is in the context" || fail "COPY sources missing from the context:$missing"

# ---------------------------------------------------------------------------------------------------------------
section "Build stage (outside a container: $CTX)"
apt_ensure() {  # installs the packages that are missing
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "not root: cannot apt-get install" >&2; return 1; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
# shellcheck disable=SC2086
apt_ensure $BUILD_PACKAGES && ok "build packages installed: $BUILD_PACKAGES" || fail "apt-get install $BUILD_PACKAGES"
if [ -n "${SSE_RELAY_BIN:-}" ]; then
  BIN=$SSE_RELAY_BIN
  skip "swift build/test steps (SSE_RELAY_BIN=$BIN given)"
else
  command -v "$SWIFT" >/dev/null || { fail "swift on PATH"; summary; }
  echo "($($SWIFT --version 2>/dev/null | head -n 1); the Dockerfile's build image is $(args_default SWIFT_IMAGE))"
  while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    start=$(date +%s)
    # shellcheck disable=SC2001
    log="$WORK/$(echo "$cmd" | sed 's/[^a-z0-9-]\+/_/g').log"
    if (cd "$CTX" && bash -c "${cmd/#swift /$SWIFT }") >"$log" 2>&1; then
      ok "RUN $cmd ($(( $(date +%s) - start )) s) $(grep -E 'Test run with|Executed .* tests' "$log" | tail -n 2 | sed 's/^[^A-Za-z]*//' | tr '\n' ' ')"
    else
      # The failing tests' own lines first (a test run's tail shows only the suites that passed last).
      fail "RUN $cmd (log: $log)" "$( { grep -E '✘|recorded an issue|Expectation failed|error:' "$log" | head -n 30; echo '[…]'; tail -n 8 "$log"; } )"
    fi
  done <<<"$BUILD_COMMANDS"
  BIN=$(cd "$CTX" && $SWIFT build -c release --show-bin-path 2>/dev/null)/sse-relay
fi
[ -x "$BIN" ] && ok "release binary: $BIN ($(du -h "$BIN" | cut -f1))" || { fail "release binary exists ($BIN)"; summary; }

# ---------------------------------------------------------------------------------------------------------------
section "Runtime stage: shared libraries vs. the runtime package list"
# shellcheck disable=SC2086
apt_ensure $RUNTIME_PACKAGES && ok "runtime packages installed here too: $RUNTIME_PACKAGES" || fail "apt-get install $RUNTIME_PACKAGES"
nocand=""
for p in $RUNTIME_PACKAGES; do [[ "$(apt-cache policy "$p" 2>/dev/null)" =~ Candidate:\ [0-9] ]] || nocand="$nocand $p"; done
[ -z "$nocand" ] && ok "every runtime package exists in bookworm's archive" || fail "runtime packages with no candidate:$nocand"

ldd_out=$(ldd "$BIN" 2>&1)
grep -q 'not found' <<<"$ldd_out" && fail "ldd: every library resolves" "$(grep 'not found' <<<"$ldd_out")" || ok "ldd: every library resolves ($(grep -c '=>\|ld-linux' <<<"$ldd_out") libraries)"
grep -qE 'libswift|libFoundation|libdispatch|libBlocksRuntime' <<<"$ldd_out" \
  && fail "Swift runtime linked statically" "$(grep -E 'libswift|libFoundation|libdispatch' <<<"$ldd_out")" \
  || ok "no Swift runtime library needed at run time (--static-swift-stdlib)"
lib_path() {  # a library name -> its path as ldd resolves it
  awk -v n="$1" '$1 == n && $2 == "=>" { print $3; exit } $1 ~ ("/" n "$") { print $1; exit }' <<<"$ldd_out"
}
pkg_of() {  # a library path -> the Debian package that ships it
  local p=$1 c
  for c in "$p" "$(readlink -f "$p")" "${p/#\/lib/\/usr\/lib}" "${p/#\/usr\/lib/\/lib}" "/usr$(readlink -f "$p")"; do
    dpkg -S "$c" 2>/dev/null | head -n 1 | cut -d: -f1 && return 0
  done
  dpkg -S "*/$(basename "$p")" 2>/dev/null | head -n 1 | cut -d: -f1
}
closure() {  # packages and everything they depend on (Depends, Pre-Depends)
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances "$@" 2>/dev/null \
    | grep -vE '^ |^<' | sed 's/:.*//' | sort -u
}
# What debian:bookworm-slim already has: the Essential packages and apt, with their dependencies.
BASE_ROOTS=$(dpkg-query -W -f='${Package} ${Essential}\n' 2>/dev/null | awk '$2 == "yes" {print $1}' | xargs)
# shellcheck disable=SC2086
BASE=$(closure $BASE_ROOTS apt)
# shellcheck disable=SC2086
PROVIDED=$(sort -u <(closure $RUNTIME_PACKAGES) <(echo "$BASE"))
in_list() { grep -qxF "$1" <<<"$2"; }

NEEDED=$(readelf -d "$BIN" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $NF); print $NF }')
direct_pkgs=""
while IFS= read -r lib; do
  [ -n "$lib" ] || continue
  path=$(lib_path "$lib"); pkg=$(pkg_of "${path:-/nonexistent/$lib}")
  direct_pkgs="$direct_pkgs $pkg"
  if [ -z "$pkg" ]; then fail "NEEDED $lib: no Debian package ships it ($path)"
  elif in_list "$pkg" "$(tr ' ' '\n' <<<"$RUNTIME_PACKAGES")"; then ok "NEEDED $lib -> $pkg (runtime apt-get line)"
  elif in_list "$pkg" "$BASE"; then ok "NEEDED $lib -> $pkg (in the base image)"
  else fail "NEEDED $lib -> $pkg: add '$pkg' to the runtime stage's apt-get install"
  fi
done <<<"$NEEDED"
bad=""
while read -r path; do
  pkg=$(pkg_of "$path")
  in_list "$pkg" "$PROVIDED" || bad="$bad $path(${pkg:-?})"
done < <(awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out")
[ -z "$bad" ] && ok "every library ldd lists ($(awk '$2 == "=>" || $1 ~ /^\//' <<<"$ldd_out" | wc -l)) comes from the runtime packages' dependencies or the base image" \
  || fail "libraries no runtime package brings:$bad"
ldd_pkgs=$(awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out" | while read -r path; do pkg_of "$path"; done | sort -u)
for p in $RUNTIME_PACKAGES; do
  case "$p" in
    ca-certificates) why="the provider's TLS certificates" ;;
    curl) grep -qw curl <<<"$HEALTHCHECK_CMD" && why="HEALTHCHECK only" || why="" ;;
    *) if in_list "$p" "$(tr ' ' '\n' <<<"$direct_pkgs")"; then why="linked directly"
       elif in_list "$p" "$ldd_pkgs"; then why="in ldd's list, through another library"
       else why=""; fi ;;
  esac
  [ -n "$why" ] && ok "runtime package $p: $why" || fail "runtime package $p: no library of the binary comes from it (drop it or say why)"
done

# ---------------------------------------------------------------------------------------------------------------
section "Runtime: the binary as the container runs it"
if [ "$(id -u)" -ne 0 ]; then skip "runtime checks need root (setpriv, unshare)"; summary; fi
command -v curl >/dev/null && command -v python3 >/dev/null || { fail "curl and python3 for the runtime checks"; summary; }
rm -rf "$ROOTFS"; mkdir -p "$ROOTFS/usr/local/bin" "$ROOTFS/etc/sse-relay" "$ROOTFS/run/secrets" "$ROOTFS/tmp"
install -m 0755 "$BIN" "$ROOTFS/usr/local/bin/sse-relay"
SECRET="sk-check-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
CLIENT_TOKEN="app-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"   # what a mobile app sends
printf '%s\n' "$SECRET" >"$ROOTFS/run/secrets/openai"
chown "0:$gid" "$ROOTFS/run/secrets/openai"; chmod 0440 "$ROOTFS/run/secrets/openai"   # k8s: defaultMode 0440 + fsGroup

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
python3 "$ROOT/deploy/testing/fake-upstream.py" "$ROOTFS/run/secrets/openai" "$WORK/upstream.port" &
PIDS+=($!)
for _ in $(seq 1 50); do [ -s "$WORK/upstream.port" ] && break; sleep 0.1; done
UPORT=$(cat "$WORK/upstream.port" 2>/dev/null); rm -f "$WORK/upstream.port"
[ -n "$UPORT" ] && ok "fake provider on 127.0.0.1:$UPORT (checks the key)" || { fail "fake provider starts"; summary; }

CONFIG_PORT=$(free_port); ENV_PORT=$(free_port); ADMIN_PORT=$(free_port)
# deploy/config.compose.json, pointed at the fake provider and this rootfs; loopback only.
python3 - "$ROOT/deploy/config.compose.json" "$ROOTFS/etc/sse-relay/config.json" "$UPORT" "$CONFIG_PORT" "$ADMIN_PORT" "$ROOTFS/run/secrets/openai" "$CLIENT_TOKEN" <<'EOF'
import hashlib, json, sys
src, dst, uport, port, admin, keyfile, token = sys.argv[1:]
c = json.load(open(src))
c["listen"] = {"host": "127.0.0.1", "port": int(port)}
c["admin"] = {"host": "127.0.0.1", "port": int(admin)}
for u in c["upstreams"].values():
    u["baseURL"] = "http://127.0.0.1:%s" % uport
if "tokens" in c.get("clients", {}):
    c["clients"]["tokens"] = [{"id": "check", "sha256": hashlib.sha256(token.encode()).hexdigest()}]
    u["key"] = {"file": keyfile}
c.setdefault("timeouts", {})["drainSeconds"] = 5
json.dump(c, open(dst, "w"), indent=2)
EOF
chmod 0644 "$ROOTFS/etc/sse-relay/config.json"; chmod 0755 "$ROOTFS/etc/sse-relay"

# as_container CMD...: PID 1 of a new PID namespace with its own /proc, root and the rootfs read-only, tmpfs /tmp,
# uid:gid from the Dockerfile, no capabilities, no_new_privs, an empty environment but for what CMD... passes
# through `env`. The /proc of the new namespace matters as in a container: libdispatch's worker monitor opens
# /proc/<tid>/stat with the thread ids of its own namespace and traps when one is missing (the host's /proc has
# other processes under those numbers, or none).
as_container() {  # call it in a subshell or with &: it execs
  local fs; fs=$(findmnt -n -o TARGET --target "$ROOTFS" 2>/dev/null || echo /)
  exec unshare --pid --fork --kill-child --mount --propagation private --mount-proc -- bash -c '
    rootfs=$1 fs=$2 uid=$3 gid=$4; shift 4
    mount -o remount,bind,ro / 2>/dev/null && { [ "$fs" = / ] || mount -o remount,bind,ro "$fs" 2>/dev/null; } \
      && mount -t tmpfs -o size=16m,mode=1777 tmpfs "$rootfs/tmp" && echo "container: read-only root, tmpfs /tmp" >&2
    exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all \
      env -i PATH=/usr/local/bin:/usr/bin:/bin TMPDIR="$rootfs/tmp" "$@"' bash "$ROOTFS" "$fs" "$uid" "$gid" "$@"
}
child_of() { cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{print $1}'; }
listening_port() { grep -o '"message":"relay listening"[^}]*"port":[0-9]*' "$1" 2>/dev/null | head -n 1 | grep -o '"port":[0-9]*' | cut -d: -f2; }
status_of() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 3 "$1"; }

out=$(as_container "$ROOTFS/usr/local/bin/sse-relay" --check-config "$ROOTFS/etc/sse-relay/config.json" 2>&1); rc=$?
[ $rc -eq 0 ] && ok "--check-config as uid $uid: the mounted config and key file (0440 root:$gid) are readable" || fail "--check-config as uid $uid (rc $rc)" "$out"

start_relay() {  # start_relay LOG [ENV...]: sets RELAY_WRAPPER (unshare) and RELAY (the relay's host pid)
  local log=$1; shift
  as_container env "$@" "$ROOTFS/usr/local/bin/sse-relay" --config "$ROOTFS/etc/sse-relay/config.json" >"$log" 2>"$log.err" </dev/null &
  RELAY_WRAPPER=$!; PIDS+=("$RELAY_WRAPPER"); RELAY=""
  for _ in $(seq 1 100); do
    RELAY=$(child_of "$RELAY_WRAPPER"); [ -n "$RELAY" ] && [ -n "$(listening_port "$log")" ] && break; sleep 0.1
  done
}
LOG=$WORK/relay.log
start_relay "$LOG" SSE_RELAY_PORT="$ENV_PORT" SSE_RELAY_WORKERS=3 SSE_RELAY_LOG_LEVEL=info
PORT=$(listening_port "$LOG")
if [ -z "$PORT" ]; then fail "relay starts in the container-like sandbox" "$(cat "$LOG" "$LOG.err" | tail -n 20)"; summary; fi
ok "relay listening on 127.0.0.1:$PORT"
grep -q 'container: read-only root' "$LOG.err" && ok "runs with a read-only root filesystem and a tmpfs /tmp" || skip "read-only root (mount namespace unavailable here)"
st=$(grep -E '^(Uid|Gid|NSpid|CapEff|NoNewPrivs):' "/proc/$RELAY/status" 2>/dev/null)
[ "$(awk '/^Uid:/ {print $2 $3}' <<<"$st")" = "$uid$uid" ] && [ "$(awk '/^Gid:/ {print $2}' <<<"$st")" = "$gid" ] \
  && ok "process runs as $uid:$gid" || fail "process runs as $uid:$gid" "$st"
[ "$(awk '/^NSpid:/ {print $NF}' <<<"$st")" = 1 ] && ok "PID 1 in its PID namespace, as in a container without --init" || fail "PID 1 in its namespace" "$st"
[ "$(awk '/^CapEff:/ {print $2}' <<<"$st")" = 0000000000000000 ] && [ "$(awk '/^NoNewPrivs:/ {print $2}' <<<"$st")" = 1 ] \
  && ok "no capabilities, no_new_privs" || fail "no capabilities, no_new_privs" "$st"
if [ "$PORT" = "$ENV_PORT" ]; then ok "SSE_RELAY_PORT overrides listen.port"
else pending "SSE_RELAY_PORT overrides listen.port" "listening on the config's port $PORT, not $ENV_PORT"; fi
grep -q '"message":"relay listening"[^}]*"workers":3' "$LOG" && ok "SSE_RELAY_WORKERS=3 honoured" || pending "SSE_RELAY_WORKERS=3 honoured" "$(grep -o '"workers":[0-9]*' "$LOG" | head -n 1)"

BASE_URL=http://127.0.0.1:$PORT
ADMIN_URL=http://127.0.0.1:$ADMIN_PORT
s=$(status_of "$BASE_URL/healthz")
if [ "$s" = 200 ] && [ "$(tr -d '\r\n' <"$WORK/body")" = ok ]; then ok "GET /healthz: 200 ok"; HEALTHZ=1
elif [ "$s" = 404 ]; then pending "GET /healthz: 200 ok" "404: not in the relay yet"; HEALTHZ=0
else fail "GET /healthz: 200 ok" "status $s: $(head -c 200 "$WORK/body")"; HEALTHZ=0; fi
s=$(status_of "$BASE_URL/readyz")
if [ "$s" = 200 ]; then ok "GET /readyz: 200"; elif [ "$s" = 404 ]; then pending "GET /readyz: 200" "404: not in the relay yet"; else fail "GET /readyz: 200" "status $s"; fi
s=$(status_of "$ADMIN_URL/metrics")
if [ "$s" = 200 ] && grep -q '^# TYPE ' "$WORK/body"; then
  ok "GET /metrics on the admin port: Prometheus text ($(grep -c '^# TYPE ' "$WORK/body") metrics)"
  s=$(status_of "$BASE_URL/metrics"); [ "$s" = 404 ] && ok "/metrics is not on the public port when admin is set" || fail "/metrics not on the public port (got $s)"
  s=$(status_of "$ADMIN_URL/healthz"); [ "$s" = 200 ] && ok "/healthz on the admin port too" || fail "/healthz on the admin port (got $s)"
else
  pending "GET /metrics on the admin listener (admin: 127.0.0.1:$ADMIN_PORT)" "status ${s:-none}: not in the relay yet"
fi
if [ -n "$HEALTHCHECK_CMD" ]; then
  # As Docker runs it: the image's USER, /bin/sh -c, the binary at its path in the image (here under ROOTFS).
  hc=${HEALTHCHECK_CMD//\/usr\/local\/bin\/sse-relay/$ROOTFS\/usr\/local\/bin\/sse-relay}
  if (as_container env SSE_RELAY_PORT="$PORT" sh -c "$hc") >"$WORK/healthcheck.out" 2>&1; then ok "the Dockerfile's HEALTHCHECK command passes as uid $uid: $(tail -n 1 "$WORK/healthcheck.out")"
  elif [ "$HEALTHZ" = 0 ]; then pending "the Dockerfile's HEALTHCHECK command passes" "waits for /healthz"
  else fail "the Dockerfile's HEALTHCHECK command passes" "$hc: $(cat "$WORK/healthcheck.out")"; fi
fi

s=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 5 "$BASE_URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{"model":"x","stream":true,"messages":[]}')
[ "$s" = 401 ] && ok "no client token: 401 ($(head -c 120 "$WORK/body"))" || fail "no client token: 401" "status $s: $(head -c 200 "$WORK/body")"
smoke=$("$ROOT/deploy/smoke.sh" "$BASE_URL" "$CLIENT_TOKEN" 2>&1); rc=$?
[ $rc -eq 0 ] && ok "deploy/smoke.sh URL TOKEN: client token and the provider key from the mounted file accepted, events progressive: $(grep -o '[0-9]* data events.*spread [0-9]* ms' <<<"$smoke")" \
  || fail "deploy/smoke.sh against the relay" "$smoke"
# The fake provider's burst is 12 events in one write, relayed as 12 writes: on a loaded machine they have reached
# the client over 101 ms, just past smoke.sh's 100 ms default, and passed as progressive. Its progressive answer
# spreads over 660 ms or more (12 events, 60 ms apart), so 400 ms tells the two apart with room on both sides.
smoke=$(MODEL=buffered MIN_SPREAD_MS=400 "$ROOT/deploy/smoke.sh" "$BASE_URL" "$CLIENT_TOKEN" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'one burst' <<<"$smoke" && ok "deploy/smoke.sh fails on a buffered stream" || fail "deploy/smoke.sh fails on a buffered stream" "$smoke"
if python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$LOG" 2>/dev/null; then
  ok "stdout is JSON lines ($(grep -c . "$LOG") lines)"; else fail "stdout is JSON lines" "$(head -n 3 "$LOG")"; fi
grep -qF -e "$SECRET" -e "$CLIENT_TOKEN" "$LOG" "$LOG.err" && fail "neither the provider key nor the client token appears in the logs" \
  || ok "neither the provider key nor the client token appears in the logs"

# SIGTERM while a stream is in flight: stop accepting, /readyz 503, the stream runs to its end, exit 0.
curl -sS -N --max-time 20 "$BASE_URL/v1/chat/completions" -H 'Content-Type: application/json' -H "Authorization: Bearer $CLIENT_TOKEN" \
  -d '{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}' >"$WORK/inflight.txt" 2>&1 &
CURL=$!; PIDS+=("$CURL")
for _ in $(seq 1 50); do grep -q '^data: ' "$WORK/inflight.txt" && break; sleep 0.05; done
t0=$(date +%s%N)
kill -TERM "$RELAY"
sleep 0.3
s=$(status_of "$ADMIN_URL/readyz")
if [ "$s" = 503 ]; then ok "/readyz answers 503 while draining"; else pending "/readyz answers 503 while draining" "admin /readyz gave ${s:-no answer}"; fi
s=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE_URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{"model":"x","messages":[]}')
[ "$s" = 000 ] || [ "$s" = 503 ] && ok "no new requests served after SIGTERM (got ${s/000/connection refused})" || fail "no new requests after SIGTERM" "status $s"
wait "$CURL" 2>/dev/null
wait "$RELAY_WRAPPER"; rc=$?
secs=$(( ($(date +%s%N) - t0) / 1000000 ))
if grep -q '^data: \[DONE\]' "$WORK/inflight.txt"; then ok "the in-flight stream ran to its end during the drain ($(grep -c '^data: ' "$WORK/inflight.txt") events)"
else pending "the in-flight stream runs to its end during the drain" "cut after $(grep -c '^data: ' "$WORK/inflight.txt") of 31 events: drain not in the relay yet"; fi
[ $rc -eq 0 ] && ok "exit status 0 after SIGTERM (as PID 1), after ${secs} ms" || fail "exit status 0 after SIGTERM" "rc=$rc after ${secs} ms; $(tail -n 3 "$LOG.err")"
[ "$secs" -lt 10000 ] && ok "exited within drainSeconds (5) + 5 s" || fail "exited within drainSeconds + 5 s (${secs} ms)"

# A second signal exits at once, even with a stream still running.
LOG2=$WORK/relay2.log
start_relay "$LOG2"
PORT2=$(listening_port "$LOG2")
if [ -n "$PORT2" ]; then
  curl -sS -N --max-time 30 "http://127.0.0.1:$PORT2/v1/chat/completions" -H 'Content-Type: application/json' -H "Authorization: Bearer $CLIENT_TOKEN" \
    -d '{"model":"very-slow","stream":true,"messages":[]}' >"$WORK/inflight2.txt" 2>&1 &
  CURL=$!; PIDS+=("$CURL")
  for _ in $(seq 1 50); do grep -q '^data: ' "$WORK/inflight2.txt" && break; sleep 0.05; done
  kill -TERM "$RELAY"; sleep 0.3
  if kill -0 "$RELAY" 2>/dev/null; then
    t0=$(date +%s%N); kill -TERM "$RELAY" 2>/dev/null
    wait "$RELAY_WRAPPER"; rc=$?; ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ "$ms" -lt 2000 ] && ok "a second SIGTERM exits at once (${ms} ms, status $rc)" || fail "a second SIGTERM exits at once" "${ms} ms"
  else
    wait "$RELAY_WRAPPER"
    pending "a second SIGTERM exits at once" "the first SIGTERM already ended the process (no drain yet)"
  fi
  kill "$CURL" 2>/dev/null
else
  fail "second relay starts" "$(tail -n 5 "$LOG2.err")"
fi

summary
