#!/usr/bin/env bash
# SSE Relay performance benchmark: the relay, nginx, HAProxy and the upstream directly, side by side, in one run.
#
#   make bench                 # full run (about 9 minutes)
#   BENCH_QUICK=1 make bench   # S1, S2 at 100 streams, S3 for 3 s, S4 (about 1 minute)
#   BENCH_ONLY="S2 S3" make bench   # only these scenarios (with BENCH_TLS=0 BENCH_STATE=0 to leave those out too)
#
# What runs (everything on 127.0.0.1, every loop bounded in count and time):
#   relay-bench upstream   fake OpenAI-compatible provider: streams `data: {...chat.completion.chunk...}` events
#                          (chunked, text/event-stream) at the pace the request asks for, each stamped with
#                          CLOCK_MONOTONIC ns at its send; answers non-streaming POSTs with a small JSON body.
#   relay-bench load       C concurrent streams (ramped), per-event latency (receive time - stamp), time to first
#                          byte, byte-exactness (rebuilds what the upstream sent), errors; the proxy's CPU (its
#                          CPU-time clock, in ns; the kernel's share from /proc/PID/stat stime, in clock ticks)
#                          and memory (VmRSS sampled every 50 ms, VmHWM).
#   wrk                    S3, non-streaming POSTs (Tests/bench/post.lua).
# Targets, interleaved per scenario, each proxy started fresh for each measurement:
#   relay   .build/release/sse-relay, "workers": 1 (Tests/bench/relay.json.template)
#   nginx   Debian's nginx, one process, proxy_buffering off, HTTP/1.1 keep-alive upstream (nginx.conf.template)
#   haproxy Debian's haproxy, one thread, option http-no-delay, http-reuse always (haproxy.cfg.template)
#   direct  the client talks to the upstream itself: the floor
# Pinning: the proxy under test on CPU $BENCH_PROXY_CPU (0), the client + upstream on CPU $BENCH_LOAD_CPU (1).
#
# Scenarios:
#   S1  one stream, 200 events at 10 ms: latency p50/p99, time to first byte (cold proxy), byte-exact
#   S1t time to first byte and proxy CPU per stream (setup + teardown): 200 one-event streams, one at a time
#   S1x the S1 stream direct with the client on the proxy's CPU: this machine's cross-CPU wake-up floor
#   S2  100 streams @ 10 ms, 1 000 @ 50 ms, 5 000 @ 100 ms, 50 events each: latency, errors, proxy peak RSS,
#       memory per stream ((peak RSS - RSS before the load) / streams), proxy CPU us per relayed event
#   S3  non-streaming POSTs, 50 connections, 10 s (3 s quick): requests/s, latency, proxy CPU per request
#   S4  200 streams, the client closes after 5 events: client close -> upstream sees its connection close
#       (recv = 0 or ECONNRESET), p50/p99, and how many of the 200 cancels reached the upstream within 3 s
#   S5  10 000 concurrent streams, 20 events @ 1 s: must work; memory per stream (capped by the fd limit)
#   S2tls  S2 at 100 (and 1 000) streams with the upstream behind TLS: relay over HTTP/1.1 and HTTP/2, nginx
#       proxy_ssl (Tests/bench/tls.sh; BENCH_TLS=0 skips it, BENCH_TLS=only runs just it)
#   S3state, S1tstate  S3 and S1t with per-address limits, on the memory backend and on Redis (Tests/bench/state.sh;
#       BENCH_STATE=0 skips them, BENCH_STATE=only runs just them)
#   IR  (BENCH_INSTRUCTIONS=1, about 1 minute more; =only runs just this) user-space instructions the proxy executes
#       per request and per relayed event, counted by valgrind's callgrind (Ir): deterministic where this shared
#       machine's times are not. Per request: 1 000 S3 POSTs (relay-bench posts, 50 connections) after 200 to warm
#       up. Per event: 10 streams of 10 and of 50 events @ 50 ms; (Ir(50) - Ir(10)) / (10 x 40). Per stream: the
#       rest of the 10-event run, / 10 (set-up and teardown). Kernel time is not in these counts.
# "load core busy" near 100 % would mean the client + upstream, not the proxy, limit that row: check it.
#
# Environment: BENCH_QUICK=1, BENCH_SCRATCH_PATH (swift build --scratch-path), BENCH_PROXY_CPU, BENCH_LOAD_CPU,
# BENCH_ROUNDS (rounds of S1, S1t and S2, each target's median shown; 3, quick 1),
# BENCH_KEEP=1 (keep the work directory with every log), BENCH_SKIP_BUILD=1, BENCH_INSTRUCTIONS=1|only,
# BENCH_IR_TARGETS (which instruction counts: "relay relay-resume relay-resume-redis relay-noheartbeat relay-budgets
# relay-budgets-redis nginx haproxy"), BENCH_WAIT_IDLE=SECONDS (wait at most that long for an idle machine before
# starting), BENCH_PRIO=rt|nice|none (see below).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
QUICK=${BENCH_QUICK:-0}
PROXY_CPU=${BENCH_PROXY_CPU:-0}
LOAD_CPU=${BENCH_LOAD_CPU:-1}
cd "$ROOT"

log() { echo "bench: $*" >&2; }
die() { log "$*"; exit 1; }

# --- Dependencies: nginx and wrk from Debian, only if missing ---------------------------------------------------
missing=""
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing="$missing haproxy"
command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
INSTRUCTIONS=${BENCH_INSTRUCTIONS:-0}
[ "$INSTRUCTIONS" != 0 ] && { command -v valgrind >/dev/null 2>&1 || missing="$missing valgrind"; }
if [ -n "$missing" ]; then
  log "installing:$missing"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null \
    || die "could not install$missing"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
command -v taskset >/dev/null || die "taskset (util-linux) is needed"
[ "$(nproc)" -ge 2 ] || log "warning: fewer than 2 CPUs; proxy and load share a core"

# --- Build -------------------------------------------------------------------------------------------------------
BUILD_FLAGS=(-c release)
[ -n "${BENCH_SCRATCH_PATH:-}" ] && BUILD_FLAGS+=(--scratch-path "$BENCH_SCRATCH_PATH")
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  log "building (swift build ${BUILD_FLAGS[*]})"
  swift build "${BUILD_FLAGS[@]}" --product sse-relay >/dev/null || die "build of sse-relay failed"
  swift build "${BUILD_FLAGS[@]}" --product relay-bench >/dev/null || die "build of relay-bench failed"
fi
BIN=$(swift build "${BUILD_FLAGS[@]}" --show-bin-path)
RELAY="$BIN/sse-relay"
BENCH="$BIN/relay-bench"
[ -x "$RELAY" ] && [ -x "$BENCH" ] || die "missing $RELAY or $BENCH"

# 10 000 streams through a proxy need 20 000+ descriptors in it.
ulimit -n 1048576 2>/dev/null || ulimit -n 200000 2>/dev/null || ulimit -n 65536 2>/dev/null || true
log "descriptor limit $(ulimit -n)"

# A shared machine's other work (builds) disturbs the measurements: run everything we start (proxies, upstream,
# client, wrk) ahead of it when allowed, and report what else ran on the two CPUs in every row.
#   BENCH_PRIO=rt (default): SCHED_FIFO 10 (chrt; the kernel's RT throttling still leaves others 5 % of a CPU);
#   BENCH_PRIO=nice: nice -10;  BENCH_PRIO=none: as started.  Without the permission it falls back to none.
PRIO=()
case "${BENCH_PRIO:-rt}" in
  rt) chrt -f 10 true 2>/dev/null && PRIO=(chrt -f 10) ;;
  nice) [ "$(nice -n -10 nice 2>/dev/null)" = -10 ] && PRIO=(nice -n -10) ;;
esac
log "priority: ${PRIO[*]:-default}; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# BENCH_WAIT_IDLE=SECONDS: first wait (at most that long) until the machine is idle (< 15 % busy over 2 s).
if [ "${BENCH_WAIT_IDLE:-0}" -gt 0 ]; then
  idle_deadline=$((SECONDS + BENCH_WAIT_IDLE))
  while [ $SECONDS -lt $idle_deadline ]; do
    a=$(awk '$1 == "cpu" { print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat); sleep 2
    b=$(awk '$1 == "cpu" { print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat)
    busy=$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); print int(100 * (y[1] - x[1]) / (y[2] - x[2] + 1)) }')
    [ "$busy" -lt 15 ] && break
    log "machine ${busy}% busy; waiting for it to be idle"
    sleep 8
  done
fi

WORK=$(mktemp -d /tmp/sse-relay-bench.XXXXXX)
RESULTS="$WORK/results.txt"
: >"$RESULTS"
UP_PID=""; PROXY_PID=""
cleanup() {
  [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
  [ -n "$UP_PID" ] && kill "$UP_PID" 2>/dev/null
  wait 2>/dev/null
  if [ "${BENCH_KEEP:-0}" = 1 ]; then log "logs kept in $WORK"; else
    find "$WORK" -mindepth 1 ! -name results.txt -exec rm -rf {} + 2>/dev/null; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for_port() {   # FILE PATTERN [TRIES] -> the port number logged in FILE (TRIES x 50 ms, default 10 s)
  local file=$1 pattern=$2 port=""
  for _ in $(seq 1 "${3:-200}"); do
    port=$(grep -o "$pattern[^}]*\"port\":[0-9]*" "$file" 2>/dev/null | head -1 | grep -o '"port":[0-9]*' | cut -d: -f2)
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.05
  done
  return 1
}

# --- The upstream (load core, for the whole run; it stops by itself after an hour at most) -----------------------
"${PRIO[@]}" taskset -c "$LOAD_CPU" "$BENCH" upstream --max-seconds 3600 >"$WORK/upstream.log" 2>&1 &
UP_PID=$!
UP_PORT=$(wait_for_port "$WORK/upstream.log" '"message":"upstream listening"') || die "upstream did not start"
log "upstream pid $UP_PID port $UP_PORT"

export BENCH_UPSTREAM_KEY=sk-bench-not-a-real-key
sed "s/@UPSTREAM_PORT@/$UP_PORT/" "$HERE/relay.json.template" >"$WORK/relay.json"
mkdir -p "$WORK/nginx-tmp"
RUN=0

# A proxy's configuration from its template: TEMPLATE LISTEN-PORT -> the text.
fill_template() {
  sed -e "s|@WORK@|$WORK|g" -e "s|@UPSTREAM_PORT@|$UP_PORT|g" -e "s|@PORT@|$2|g" -e "s|@NOFILE@|$(ulimit -n)|g" "$1"
}

# Waits until PORT accepts connections; NAME ERROR-LOG say what failed if PROXY_PID died instead.
wait_for_listener() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.05
  done
  kill -0 "$PROXY_PID" 2>/dev/null || { cat "$2" >&2; die "$1 did not start"; }
}

start_proxy() {   # relay|nginx|haproxy|direct -> PROXY_PID, PORT
  RUN=$((RUN + 1))
  case $1 in
    relay)
      "${PRIO[@]}" taskset -c "$PROXY_CPU" "$RELAY" --config "${RELAY_CONFIG:-$WORK/relay.json}" >"$WORK/relay-$RUN.log" 2>&1 &
      PROXY_PID=$!
      PORT=$(wait_for_port "$WORK/relay-$RUN.log" '"message":"relay listening"') || { cat "$WORK/relay-$RUN.log" >&2; die "relay did not start"; }
      ;;
    nginx)
      PORT=$("$BENCH" free-port)
      fill_template "${NGINX_TEMPLATE:-$HERE/nginx.conf.template}" "$PORT" >"$WORK/nginx.conf"
      "${PRIO[@]}" taskset -c "$PROXY_CPU" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" >"$WORK/nginx-$RUN.log" 2>&1 &
      PROXY_PID=$!
      wait_for_listener nginx "$WORK/nginx-error.log"
      ;;
    haproxy)
      PORT=$("$BENCH" free-port)
      fill_template "$HERE/haproxy.cfg.template" "$PORT" >"$WORK/haproxy.cfg"
      "${PRIO[@]}" taskset -c "$PROXY_CPU" "$HAPROXY" -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy-$RUN.log" 2>&1 &
      PROXY_PID=$!
      wait_for_listener haproxy "$WORK/haproxy-$RUN.log"
      ;;
    direct)
      PROXY_PID=""; PORT=$UP_PORT ;;
    relay-mem|relay-redis) state_start_proxy "$1" ;;   # Tests/bench/state.sh
    *) tls_start_proxy "$1" ;;   # relay-tls, relay-h2, nginx-tls (Tests/bench/tls.sh)
  esac
}

stop_proxy() {
  if [ -n "$PROXY_PID" ]; then
    kill "$PROXY_PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$PROXY_PID" 2>/dev/null
    wait "$PROXY_PID" 2>/dev/null
    PROXY_PID=""
  fi
}

# Stops a helper process started in the background (a TLS terminator, redis-server) and reaps it.
stop_pid() { [ -n "$1" ] && { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }; return 0; }

# BENCH_ONLY="S2 S3": run only these scenarios (the others are skipped where they would start).
bench_selected() { [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $1 "* ]]; }

# One streaming measurement: SCENARIO TITLE TARGET load-options... (CLIENT_CPU overrides the client's CPU)
stream_run() {
  local scenario=$1 title=$2 target=$3; shift 3
  bench_selected "$scenario" || return 0
  start_proxy "$target"
  log "$scenario $title: $target"
  "${PRIO[@]}" taskset -c "${CLIENT_CPU:-$LOAD_CPU}" "$BENCH" load --port "$PORT" ${PROXY_PID:+--proxy-pid "$PROXY_PID"} \
    --proxy-cpu "$PROXY_CPU" --load-cpu "${CLIENT_CPU:-$LOAD_CPU}" \
    --upstream-pid "$UP_PID" --upstream-port "$UP_PORT" --id-base $((RUN * 100000)) \
    --labels "scenario=$scenario title=$title target=$target" "$@" >>"$RESULTS" 2>>"$WORK/load.log"
  [ $? -eq 0 ] || log "load client failed ($scenario $target), see $WORK/load.log"
  tail -1 "$RESULTS" | grep -q "target=$target" || echo "RESULT scenario=$scenario title=$title target=$target errors=client_failed" >>"$RESULTS"
  stop_proxy
  sleep 0.3
}

# CPU seconds (utime + stime) of a process; sys_of: stime alone (the kernel's share).
cpu_of() { [ -n "$1" ] && awk '{ sub(/.*\) /, ""); print ($12 + $13) / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat" 2>/dev/null || echo 0; }
sys_of() { [ -n "$1" ] && awk '{ sub(/.*\) /, ""); print $13 / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Busy and total jiffies of one CPU from /proc/stat.
core_ticks() { awk -v c="cpu$1" '$1 == c { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }
to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us$/, "", v); print v / 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v); print v + 0 } else if (v ~ /s$/) { sub(/s$/, "", v); print v * 1000 } else print "n/a" }'; }

# One wrk measurement: SCENARIO TITLE TARGET SECONDS
wrk_run() {
  local scenario=$1 title=$2 target=$3 seconds=$4
  bench_selected "$scenario" || return 0
  start_proxy "$target"
  log "$scenario $title: $target"
  local cpu0 up0 core0 pcore0 cpu1 up1 core1 pcore1 t0 t1 out sys0 sys1
  sys0=$(sys_of "$PROXY_PID"); cpu0=$(cpu_of "$PROXY_PID"); up0=$(cpu_of "$UP_PID"); core0=$(core_ticks "$LOAD_CPU"); pcore0=$(core_ticks "$PROXY_CPU")
  times >"$WORK/times0"
  out=$("${PRIO[@]}" taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${seconds}s" --timeout 5s --latency -s "$HERE/post.lua" \
    "http://127.0.0.1:$PORT/v1/chat/completions?stream=0&size=64" 2>&1)
  cpu1=$(cpu_of "$PROXY_PID"); sys1=$(sys_of "$PROXY_PID"); up1=$(cpu_of "$UP_PID"); core1=$(core_ticks "$LOAD_CPU"); pcore1=$(core_ticks "$PROXY_CPU")
  times >"$WORK/times1"; t0=$(tail -1 "$WORK/times0"); t1=$(tail -1 "$WORK/times1")
  echo "$out" >>"$WORK/wrk.log"
  local rps total non2xx sockerr p50 p99 line
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  total=$(awk '/requests in/ { print $1 }' <<<"$out")
  non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out"); non2xx=${non2xx:-0}
  sockerr=$(awk -F'[ ,]+' '/Socket errors/ { print $4 + $6 + $8 + $10 }' <<<"$out"); sockerr=${sockerr:-0}
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  line="RESULT scenario=$scenario title=$title target=$target rps=${rps:-n/a} requests=${total:-0} lat_p50_ms=$p50 lat_p99_ms=$p99 errors=$((non2xx + sockerr))"
  # wrk's own CPU: the children's times of this shell (bash `times`), before and after.
  local wrk_cpu load_pct
  wrk_cpu=$(awk -v a="$t0" -v b="$t1" 'function s(t) { split(t, p, "m"); sub(/s$/, "", p[2]); return p[1] * 60 + p[2] }
    BEGIN { split(a, x, " "); split(b, y, " "); print s(y[1]) + s(y[2]) - s(x[1]) - s(x[2]) }')
  load_pct=$(awk -v w="$wrk_cpu" -v a="$up0" -v b="$up1" -v s="$seconds" 'BEGIN { printf "%.1f", (w + b - a) * 100 / s }')
  line+=" load_core_pct=$load_pct"
  line+=" other_on_load_cpu_pct=$(awk -v a="$core0" -v b="$core1" -v l="$load_pct" 'BEGIN { split(a, x, " "); split(b, y, " "); if (y[2] > x[2]) { v = 100 * (y[1] - x[1]) / (y[2] - x[2]) - l; printf "%.1f", v < 0 ? 0 : v } else print "n/a" }')"
  line+=" other_on_proxy_cpu_pct=$(awk -v a="$pcore0" -v b="$pcore1" -v c0="$cpu0" -v c1="$cpu1" -v s="$seconds" 'BEGIN { split(a, x, " "); split(b, y, " "); if (y[2] > x[2]) { v = 100 * (y[1] - x[1]) / (y[2] - x[2]) - (c1 - c0) * 100 / s; printf "%.1f", v < 0 ? 0 : v } else print "n/a" }')"
  if [ -n "$PROXY_PID" ] && [ -n "$total" ] && [ "$total" -gt 0 ]; then
    line+=" cpu_us_per_request=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$total" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')"
    line+=" sys_us_per_request=$(awk -v a="$sys0" -v b="$sys1" -v n="$total" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')"
    line+=" proxy_core_pct=$(awk -v a="$cpu0" -v b="$cpu1" -v s="$seconds" 'BEGIN { printf "%.1f", (b - a) * 100 / s }')"
  fi
  echo "$line" >>"$RESULTS"
  stop_proxy
  sleep 0.3
}

TARGETS=(relay nginx haproxy direct)

# IR: instructions per request and per relayed event under callgrind (see the header). valgrind 3.19 cannot read
# the DWARF 5 of a Swift release build (it gives up), so the relay runs as a copy without debug sections (the
# symbol table stays: the profile still names functions); and libdispatch's sigsuspend needs a writable mask
# (valgrind_sigsuspend.c). Each count is taken between `callgrind_control -z` (zero) and `-d` (dump).
ir_dump() {   # PID OUTFILE-PREFIX -> Ir since the last zero
  local before after
  before=$(ls "$2".* 2>/dev/null | wc -l)
  callgrind_control -d "$1" >/dev/null 2>&1
  for _ in $(seq 1 100); do after=$(ls "$2".* 2>/dev/null | wc -l); [ "$after" -gt "$before" ] && break; sleep 0.1; done
  awk '/^summary:/ { print $2 }' "$(ls -v "$2".* | tail -1)"
}
ir_run() {   # relay|relay-resume|nginx|haproxy
  local target=$1 out="$WORK/callgrind-$1" pid port
  RUN=$((RUN + 1))
  case $target in
    relay|relay-*)
      # The features table: the plain relay (usage, heartbeats every 15 s) beside the same relay with one thing
      # changed. relay-resume: the route kept resumable (routes[].resume, memory), what a replay buffer costs;
      # relay-noheartbeat: heartbeats off (routes[].heartbeatSeconds 0), what heartbeats cost; relay-budgets: token
      # and dollar budgets per identity (the client address) and in total, with a price for the model, all far
      # above what the run spends; the -redis variants: the same on "state": {"backend": "redis"}, a redis-server
      # on the load CPU (admission and settle round trips included; the replay buffer copied to it).
      local route='"auth": "none" }'
      case $target in
        relay-resume*) route='"auth": "none", "resume": { "windowSeconds": 30, "maxBufferBytes": 4194304 } }' ;;
        relay-noheartbeat) route='"auth": "none", "heartbeatSeconds": 0 }' ;;
      esac
      local extra=''
      case $target in
        relay-budgets*) extra='"pricing": { "bench-model": { "input": 0.15, "output": 0.60 } }, "budgets": { "perIdentity": { "tokensPerDay": 1000000000, "usdPerDay": 100000 }, "total": { "tokensPerMonth": 100000000000, "usdPerMonth": 1000000 } },' ;;
      esac
      case $target in
        *-redis)
          command -v redis-server >/dev/null || { log "IR: no redis-server, no $target row"; return; }
          IR_REDIS_PORT=$("$BENCH" free-port)
          taskset -c "$LOAD_CPU" redis-server --port "$IR_REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
            >"$WORK/ir-redis.log" 2>&1 &
          IR_REDIS_PID=$!
          for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$IR_REDIS_PORT") 2>/dev/null && break; sleep 0.05; done
          extra="$extra"' "state": { "backend": "redis", "redis": { "url": "redis://127.0.0.1:'"$IR_REDIS_PORT"'/0", "timeoutMs": 1000 } },'
          ;;
      esac
      # Each substitution must take: a row named for a feature that is not on would be a false row.
      if [ "$target" != relay ]; then
        sed -e "s|\"auth\": \"none\" }|$route|" -e "s|\"workers\": 1,|\"workers\": 1, $extra|" "$WORK/relay.json" >"$WORK/$target.json"
        cmp -s "$WORK/relay.json" "$WORK/$target.json" && { log "IR: $target: the configuration did not change"; return; }
      fi
      [ -f "$WORK/relay-nodebug" ] || { cp "$RELAY" "$WORK/relay-nodebug" && strip -g "$WORK/relay-nodebug"; }
      [ -f "$WORK/sigsuspend.so" ] || "${CC:-cc}" -shared -fPIC -O2 -o "$WORK/sigsuspend.so" "$HERE/valgrind_sigsuspend.c" \
        || { log "IR: cannot build the sigsuspend shim (cc)"; return; }
      LD_PRELOAD="$WORK/sigsuspend.so" taskset -c "$PROXY_CPU" valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$WORK/relay-nodebug" --config "$WORK/$target.json" >"$WORK/relay-$RUN.log" 2>"$WORK/valgrind-$RUN.log" &
      pid=$!
      # Valgrind starts slowly, and more so on a busy machine: a minute.
      port=$(wait_for_port "$WORK/relay-$RUN.log" '"message":"relay listening"' 1200) || { log "IR: relay under valgrind did not start"; kill $pid; return; }
      ;;
    nginx)
      port=$("$BENCH" free-port)
      fill_template "$HERE/nginx.conf.template" "$port" >"$WORK/nginx.conf"
      taskset -c "$PROXY_CPU" valgrind --tool=callgrind --callgrind-out-file="$out" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" \
        >"$WORK/nginx-$RUN.log" 2>"$WORK/valgrind-$RUN.log" &
      pid=$!
      for _ in $(seq 1 1200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
      ;;
    haproxy)
      port=$("$BENCH" free-port)
      fill_template "$HERE/haproxy.cfg.template" "$port" >"$WORK/haproxy.cfg"
      taskset -c "$PROXY_CPU" valgrind --tool=callgrind --callgrind-out-file="$out" "$HAPROXY" -db -f "$WORK/haproxy.cfg" \
        >"$WORK/haproxy-$RUN.log" 2>"$WORK/valgrind-$RUN.log" &
      pid=$!
      for _ in $(seq 1 1200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
      ;;
  esac
  log "IR: $target under callgrind (pid $pid)"
  local load=(taskset -c "$LOAD_CPU" "$BENCH")
  "${load[@]}" posts --port "$port" --requests 200 --connections 50 >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  local posts ir_posts n_posts
  posts=$("${load[@]}" posts --port "$port" --requests 1000 --connections 50)
  ir_posts=$(ir_dump "$pid" "$out")
  n_posts=$(grep -o 'requests=[0-9]*' <<<"$posts" | cut -d= -f2)
  local ir_s=() ev=()
  for events in 10 50; do
    callgrind_control -z "$pid" >/dev/null 2>&1
    local r
    r=$("${load[@]}" load --port "$port" --streams 10 --ramp-ms 50 --events "$events" --pace-us 50000 --size 64 \
      --id-base $((RUN * 100000 + events * 100)) --timeout-s 120)
    ir_s+=("$(ir_dump "$pid" "$out")")
    ev+=("$(grep -o ' events=[0-9]*' <<<"$r" | cut -d= -f2)")
  done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  case $target in *-redis) kill "$IR_REDIS_PID" 2>/dev/null; wait "$IR_REDIS_PID" 2>/dev/null ;; esac
  awk -v t="$target" -v ip="$ir_posts" -v np="$n_posts" -v a="${ir_s[0]}" -v b="${ir_s[1]}" -v ea="${ev[0]}" -v eb="${ev[1]}" 'BEGIN {
    line = "RESULT scenario=IR title=user-space_instructions_(callgrind_Ir),_proxy_only target=" t
    if (np > 0) line = line sprintf(" ir_per_request=%d", ip / np)
    if (eb > ea) { pe = (b - a) / (eb - ea); line = line sprintf(" ir_per_event=%d ir_per_stream=%d", pe, (a - pe * ea) / 10) }
    line = line " posts=" np " events=" ea "/" eb
    if (t !~ /^relay-/) print line
    # The features table: the plain relay beside the same relay with the feature on (or off).
    if (t ~ /^relay/) { sub("scenario=IR ", "scenario=IRfeatures ", line); sub("target=relay-", "target=", line); print line } }' >>"$RESULTS"
}

if [ "$INSTRUCTIONS" != 0 ]; then
  for t in ${BENCH_IR_TARGETS:-relay relay-resume relay-resume-redis relay-noheartbeat relay-budgets relay-budgets-redis nginx haproxy}; do ir_run "$t"; done
fi
# ATTEST: the CPU an App Attest assertion adds to one request (the relay's own steps, process CPU time, on the
# proxy CPU; a few seconds). See AttestBench in Sources/relay-bench.
log "ATTEST: App Attest assertion cost"
"${PRIO[@]}" taskset -c "$PROXY_CPU" "$BENCH" attest --requests 5000 >>"$RESULTS" 2>>"$WORK/load.log" || log "attest bench failed"

if [ "$INSTRUCTIONS" = only ]; then TARGETS=(); fi

# S2tls, the upstream behind TLS (relay HTTP/1.1 and HTTP/2, nginx proxy_ssl): see Tests/bench/tls.sh.
S3_SECONDS=10; [ "$QUICK" = 1 ] && S3_SECONDS=3
[ "$INSTRUCTIONS" = only ] || [ "${BENCH_STATE:-1}" = only ] || source "$HERE/tls.sh"
# S3state, S1tstate: the per-address limits on the memory backend and on Redis: see Tests/bench/state.sh.
[ "$INSTRUCTIONS" = only ] || [ "${BENCH_TLS:-1}" = only ] || source "$HERE/state.sh"

# S1, S1t and S2 run in ROUNDS rounds (BENCH_ROUNDS, 3; 1 with BENCH_QUICK), the targets interleaved in each, and
# the report shows each target's median: one sample of a fresh proxy's first byte ranged from 0.6 to 2.1 ms on this
# machine in one evening, and S2 at 5 000 streams' first byte from 478 to 913 µs between two full runs.
ROUNDS=${BENCH_ROUNDS:-3}; [ "$QUICK" = 1 ] && ROUNDS=${BENCH_ROUNDS:-1}
for round in $(seq 1 "$ROUNDS"); do
  # S1: one stream, 200 events at 10 ms, 64 content bytes per event; the first byte is a fresh proxy's (cold).
  for t in "${TARGETS[@]}"; do
    stream_run S1 "1_stream_x_200_events_@_10_ms" "$t" --streams 1 --events 200 --pace-us 10000 --size 64 --seed 42 --timeout-s 30
  done
  # S1t: time to first byte and CPU per stream of a warm proxy: 200 one-event streams, 10 ms apart (one at a time).
  for t in "${TARGETS[@]}"; do
    stream_run S1t "200_one-event_streams,_one_at_a_time_(new_connection_each)" "$t" \
      --streams 200 --ramp-ms 2000 --events 1 --pace-us 1000 --size 64 --timeout-s 30
  done
done

# S1x: the same stream direct, but with the client on the proxy's CPU: what one cross-CPU wake-up costs on this
# machine (every proxied event needs two), i.e. the floor under the proxies' S1 numbers.
[ ${#TARGETS[@]} -gt 0 ] && CLIENT_CPU=$PROXY_CPU stream_run S1x "S1_direct_with_the_client_on_the_proxy_CPU_(cross-CPU_wake-up_floor)" direct \
  --streams 1 --events 200 --pace-us 10000 --size 64 --seed 42 --timeout-s 30

# S4: 200 streams, the client leaves after 5 events (ramped over 1 s so the closes do not coincide).
for t in "${TARGETS[@]}"; do
  stream_run S4 "200_streams,_client_closes_after_5_of_50_events_@_10_ms" "$t" \
    --streams 200 --ramp-ms 1000 --events 50 --pace-us 10000 --size 64 --close-after 5 --timeout-s 30
done

# S3: non-streaming POSTs with wrk, 50 connections.
for t in "${TARGETS[@]}"; do
  wrk_run S3 "non-streaming_POST,_50_connections,_${S3_SECONDS}_s" "$t" "$S3_SECONDS"
done

# S2: concurrent streams of 50 events. The ramp spreads the starts over at least one pace interval.
S2_LEVELS=("100 10000 1000" "1000 50000 2000" "5000 100000 3000")
[ "$QUICK" = 1 ] && S2_LEVELS=("100 10000 1000")
for round in $(seq 1 "$ROUNDS"); do
  for level in "${S2_LEVELS[@]}"; do
    read -r streams pace ramp <<<"$level"
    for t in "${TARGETS[@]}"; do
      stream_run S2 "${streams}_streams_x_50_events_@_$((pace / 1000))_ms" "$t" \
        --streams "$streams" --ramp-ms "$ramp" --events 50 --pace-us "$pace" --size 64 --timeout-s 60
    done
  done
done

# S5: 10 000 concurrent streams (full mode only), 20 events at 1 s (10 000 events/s, like S2 at 1 000 streams),
# all open at once for 15 s. A proxy holds two descriptors per stream: where the hard descriptor limit is below
# 20 000 + a few (this sandbox: 20 000, not raisable), the run uses as many streams as fit and says so.
if [ "$QUICK" != 1 ] && [ ${#TARGETS[@]} -gt 0 ]; then
  S5_STREAMS=10000
  fd_limit=$(ulimit -n)
  if [ "$fd_limit" != unlimited ] && [ $(((fd_limit - 100) / 2)) -lt $S5_STREAMS ]; then
    S5_STREAMS=$(((fd_limit - 100) / 2))
    log "descriptor limit $fd_limit: S5 runs $S5_STREAMS streams, not 10000"
  fi
  for t in "${TARGETS[@]}"; do
    stream_run S5 "${S5_STREAMS}_streams_x_20_events_@_1_s_(descriptor_limit_$fd_limit)" "$t" \
      --streams "$S5_STREAMS" --ramp-ms 5000 --events 20 --pace-us 1000000 --size 64 --timeout-s 90
  done
fi

upstream_stats=$(curl -s "http://127.0.0.1:$UP_PORT/_bench/stats" 2>/dev/null || true)
header="SSE Relay benchmark $(date -u +%Y-%m-%dT%H:%MZ)$([ "$QUICK" = 1 ] && echo ' (quick)')
machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)
proxy on CPU $PROXY_CPU (relay \"workers\": 1; nginx one process; haproxy one thread), client + upstream on CPU $LOAD_CPU; $(nginx -v 2>&1 | sed 's/.*: //'); $("$HAPROXY" -v 2>/dev/null | head -1 | cut -d' ' -f1-3)
latency = client receive time - upstream send stamp (CLOCK_MONOTONIC); relay/nginx < 1 means the relay is lower
target = issue 24's goal for the row (relay against nginx, or an absolute bound): met / not met
upstream totals: ${upstream_stats:-n/a}"
"$BENCH" report "$RESULTS" --header "$header"
grep -h "relay-bench load:" "$WORK/load.log" 2>/dev/null | head -20 | sed 's/^/note: /'
log "raw results: $RESULTS"
