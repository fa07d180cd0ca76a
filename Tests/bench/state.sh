# S3state and S1tstate: what shared state costs. Sourced by Tests/bench/run.sh (uses its helpers and variables:
# start_proxy, wrk_run, stream_run, BENCH, WORK, PRIO, the CPUs); runs where it is sourced.
#
#   relay-mem    relay.json plus per-address limits (a token bucket and a stream lease for every request) on the
#                memory backend
#   relay-redis  the same limits on "state": {"backend": "redis"}: one EVALSHA round trip per admission and one per
#                settle, to a redis-server on the load CPU (loopback, persistence off; its CPU counts as load)
# Rows: S3 (non-streaming POSTs, 50 connections: requests/s, CPU per request) and S1t (time to first byte, one
# stream at a time: what the admission's round trip adds). The bar: requests/s with Redis at least 0.7x
# memory, and under 0.3 ms added to the first byte at p50.
#
# BENCH_STATE=0 skips these rows; BENCH_STATE=only runs just them.

STATE_REDIS_PID=""

state_stop_redis() { stop_pid "$STATE_REDIS_PID"; STATE_REDIS_PID=""; }

# redis-server and the two configurations.
state_setup() {
  command -v redis-server >/dev/null || { log "redis-server is not installed: the shared-state rows are skipped"; return 1; }
  STATE_REDIS_PORT=$("$BENCH" free-port)
  "${PRIO[@]}" taskset -c "$LOAD_CPU" redis-server --port "$STATE_REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    >"$WORK/redis.log" 2>&1 &
  STATE_REDIS_PID=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$STATE_REDIS_PORT") 2>/dev/null && break; sleep 0.05; done
  kill -0 "$STATE_REDIS_PID" 2>/dev/null || { cat "$WORK/redis.log" >&2; die "redis-server did not start"; }
  log "redis-server pid $STATE_REDIS_PID port $STATE_REDIS_PORT"
  local limits='"rateLimits": { "perAddress": { "requestsPerMinute": 1000000000, "burst": 100000000, "concurrentStreams": 100000 } },'
  local backend
  for backend in memory redis; do
    local state='"state": { "backend": "memory" },'
    [ "$backend" = redis ] && state='"state": { "backend": "redis", "redis": { "url": "redis://127.0.0.1:'"$STATE_REDIS_PORT"'/0", "timeoutMs": 1000 } },'
    sed "s|\"workers\": 1,|$limits $state \"workers\": 1,|" "$WORK/relay.json" >"$WORK/relay-state-$backend.json"
    grep -q '"backend"' "$WORK/relay-state-$backend.json" || die "relay.json.template has no \"workers\": 1 to add the state to"
  done
}

# start_proxy's arm for the shared-state targets.
state_start_proxy() {
  case $1 in
    relay-mem) RELAY_CONFIG="$WORK/relay-state-memory.json" start_proxy relay ;;
    relay-redis) RELAY_CONFIG="$WORK/relay-state-redis.json" start_proxy relay ;;
    *) die "unknown target $1" ;;
  esac
}

if [ "${BENCH_STATE:-1}" != 0 ] && state_setup; then
  trap 'state_stop_redis; cleanup' EXIT
  for t in relay-mem relay-redis; do
    wrk_run S3state "non-streaming_POST,_50_connections,_${S3_SECONDS}_s,_per-address_limits" "$t" "$S3_SECONDS"
  done
  for t in relay-mem relay-redis; do
    stream_run S1tstate "200_one-event_streams,_one_at_a_time,_per-address_limits" "$t" \
      --streams 200 --ramp-ms 2000 --events 1 --pace-us 1000 --size 64 --timeout-s 30
  done
  state_stop_redis
fi
[ "${BENCH_STATE:-1}" = only ] && TARGETS=()
