# S2tls: S2 with the upstream behind TLS, as production providers are. Sourced by Tests/bench/run.sh (uses its
# helpers and variables: start_proxy, stream_run, BENCH, WORK, PRIO, the CPUs); runs where it is sourced.
#
#   relay-tls  the relay to https://, "httpVersion": "1.1", "caFile": one TLS connection per concurrent stream
#   relay-h2   the relay to https://, "httpVersion": "2": curl multiplexes up to 100 streams on one TLS connection
#              (CURLMOPT_MAX_CONCURRENT_STREAMS' default)
#   nginx-tls  nginx, proxy_pass https:// with proxy_ssl_verify on, proxy_ssl_session_reuse on, HTTP/1.1 keep-alive
#              (nginx's proxy speaks only HTTP/1.x to an upstream)
# Each relay config is relay.json with only the upstream's baseURL, caFile and httpVersion changed; the nginx one is
# nginx.conf.template with only proxy_pass made https:// and the proxy_ssl lines added (proxy_ssl_protocols adds
# TLSv1.3, which nginx 1.22's proxy leaves out by default, so that both proxies speak TLS 1.3 to the provider).
# The provider: a second nginx on the load CPU (nginx-tls-terminator.conf.template) terminating TLS (HTTP/1.1 and
# HTTP/2 by ALPN) in front of the fake upstream, with a throwaway CA and P-256 certificate made by the openssl CLI
# (the commands of Tests/TestHarness/TLSUpstream.swift). Its CPU counts as load ("load core busy"), not as
# "other processes on load CPU". Levels: 100 streams @ 10 ms; full mode adds 1 000 @ 50 ms (as S2).
#
# BENCH_TLS=0 skips these rows; BENCH_TLS=only runs just them (the plain scenarios' target lists are emptied;
# S1x, one 2-second direct stream, still runs).

TLS_DIR="$WORK/tls"
TLS_TERM_PID=""

tls_stop_terminator() { stop_pid "$TLS_TERM_PID"; TLS_TERM_PID=""; }

tls_wait_tcp() {   # PORT: waits up to 5 s until something accepts on 127.0.0.1:PORT
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# The CA, the provider's certificate (127.0.0.1 and localhost), the terminator, and the proxies' configurations.
tls_setup() {
  mkdir -p "$TLS_DIR" "$WORK/tls-tmp"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$TLS_DIR/server.ext"
  openssl req -x509 "${ec[@]}" -keyout "$TLS_DIR/ca.key" -out "$TLS_DIR/ca.pem" -days 2 -subj "/CN=Bench CA" 2>/dev/null &&
    openssl req "${ec[@]}" -keyout "$TLS_DIR/server.key" -out "$TLS_DIR/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null &&
    openssl x509 -req -in "$TLS_DIR/server.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca.key" -CAcreateserial \
      -out "$TLS_DIR/server.pem" -days 2 -extfile "$TLS_DIR/server.ext" 2>/dev/null ||
    die "openssl could not make the TLS test certificates"

  TLS_PORT=$("$BENCH" free-port)
  sed -e "s|@WORK@|$WORK|g" -e "s|@TLS_DIR@|$TLS_DIR|g" -e "s|@UPSTREAM_PORT@|$UP_PORT|g" -e "s|@PORT@|$TLS_PORT|g" \
    -e "s|@NOFILE@|$(ulimit -n)|g" "$HERE/nginx-tls-terminator.conf.template" >"$WORK/tls-terminator.conf"
  "${PRIO[@]}" taskset -c "$LOAD_CPU" "$NGINX" -p "$WORK" -c "$WORK/tls-terminator.conf" >"$WORK/tls-terminator.log" 2>&1 &
  TLS_TERM_PID=$!
  tls_wait_tcp "$TLS_PORT" && kill -0 "$TLS_TERM_PID" 2>/dev/null ||
    { cat "$WORK/tls-terminator-error.log" >&2; die "the TLS terminator did not start"; }
  log "TLS terminator pid $TLS_TERM_PID port $TLS_PORT"

  local version
  for version in 1.1 2; do
    sed -E "s|\"baseURL\": *\"[^\"]*\"|\"baseURL\": \"https://127.0.0.1:$TLS_PORT\", \"caFile\": \"$TLS_DIR/ca.pem\", \"httpVersion\": \"$version\"|" \
      "$WORK/relay.json" >"$WORK/relay-tls-$version.json"
    grep -q '"caFile"' "$WORK/relay-tls-$version.json" || die "relay.json.template has no baseURL to point at the TLS upstream"
  done
  sed -e "s|@UPSTREAM_PORT@|$TLS_PORT|g" \
    -e "s|proxy_pass http://bench_upstream;|proxy_pass https://bench_upstream;\n            proxy_ssl_trusted_certificate $TLS_DIR/ca.pem;\n            proxy_ssl_verify on;\n            proxy_ssl_name localhost;\n            proxy_ssl_session_reuse on;\n            proxy_ssl_protocols TLSv1.2 TLSv1.3;|" \
    "$HERE/nginx.conf.template" >"$WORK/nginx-tls.conf.template"
  grep -q 'proxy_ssl_verify on' "$WORK/nginx-tls.conf.template" || die "nginx.conf.template has no proxy_pass to make https://"
}

# start_proxy's arm for the TLS targets (same relay and nginx start, other configuration).
tls_start_proxy() {
  case $1 in
    relay-tls) RELAY_CONFIG="$WORK/relay-tls-1.1.json" start_proxy relay ;;
    relay-h2) RELAY_CONFIG="$WORK/relay-tls-2.json" start_proxy relay ;;
    nginx-tls) NGINX_TEMPLATE="$WORK/nginx-tls.conf.template" start_proxy nginx ;;
    *) die "unknown target $1" ;;
  esac
}

if [ "${BENCH_TLS:-1}" != 0 ]; then
  trap 'tls_stop_terminator; cleanup' EXIT
  tls_setup
  TLS_LEVELS=("100 10000 1000" "1000 50000 2000")
  [ "$QUICK" = 1 ] && TLS_LEVELS=("100 10000 1000")
  for level in "${TLS_LEVELS[@]}"; do
    read -r streams pace ramp <<<"$level"
    for t in relay-tls relay-h2 nginx-tls; do
      stream_run S2tls "${streams}_streams_x_50_events_@_$((pace / 1000))_ms,_upstream_over_TLS" "$t" \
        --streams "$streams" --ramp-ms "$ramp" --events 50 --pace-us "$pace" --size 64 --timeout-s 60 \
        --extra-load-pid "$TLS_TERM_PID"
    done
  done
  tls_stop_terminator
  [ "${BENCH_TLS:-1}" = only ] && TARGETS=()
fi
