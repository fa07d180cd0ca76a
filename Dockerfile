# SSE Relay container image.
#
#   docker build -t sse-relay:0.1.0 .
#   docker run --rm -p 8080:8080 -v "$PWD/deploy/config.compose.json:/etc/sse-relay/config.json:ro" \
#     -v "$PWD/openai.key:/run/secrets/openai:ro" sse-relay:0.1.0
#
# Configuration and secrets are mounted at run time, never baked in (.dockerignore keeps them out of the context;
# the build stage gets only the secret-free config.example.json, which a test loads).
# deploy/check-image-steps.sh runs these same steps outside a container and parses this file: keep each
# `apt-get install` on its own RUN with plain package names.

# The toolchain the tests run with (Swift 6.3.1); 6.0 images are not checked.
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---- build: compile, run every unit/integration test, then the release binary ----------------------------------
# The tests start real components: a TLS upstream (python3-h2, openssl) and redis-server.
FROM ${SWIFT_IMAGE} AS build

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcurl4-openssl-dev libssl-dev openssl python3-h2 redis-server \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
# Read by the tests only (ProviderPresetTests loads the shipped example); the runtime stage never gets it.
COPY config.example.json ./

RUN swift build --build-tests && swift test --skip-build

RUN swift build -c release --static-swift-stdlib --product sse-relay \
 && install -D -m 0755 "$(swift build -c release --show-bin-path)/sse-relay" /out/sse-relay

# ---- runtime: Debian slim + the shared libraries the binary links (see `ldd`), nothing else -----------------------
FROM ${RUNTIME_IMAGE}

# libcurl4 (libcurl.so.4), libssl3 (libssl.so.3, libcrypto.so.3), libstdc++6, ca-certificates for the provider's TLS.
# No curl: HEALTHCHECK uses the relay's own `--probe URL`.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcurl4 libssl3 libstdc++6 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# Fixed non-root uid/gid: Kubernetes' runAsUser, file ownership of mounted secrets and fsGroup rely on it.
RUN groupadd --system --gid 10001 sse-relay \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sse-relay

COPY --from=build /out/sse-relay /usr/local/bin/sse-relay

LABEL org.opencontainers.image.title="sse-relay" \
      org.opencontainers.image.description="Relays an LLM provider's Server-Sent Events to mobile apps without giving them the key"

USER 10001:10001
# 8080: the relay (listen.port); 9090: /metrics, /healthz, /readyz when the configuration sets "admin".
EXPOSE 8080 9090
# SIGTERM: stop accepting, /readyz 503, drain streams up to timeouts.drainSeconds, exit 0. Give the container
# a stop timeout longer than the drain (docker stop -t 45, compose stop_grace_period, k8s terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
# `--probe URL`: one GET, exit 0 on a 2xx. Shell form so that SSE_RELAY_PORT, if set, is followed.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD /usr/local/bin/sse-relay --probe "http://127.0.0.1:${SSE_RELAY_PORT:-8080}/healthz" || exit 1

ENTRYPOINT ["/usr/local/bin/sse-relay"]
CMD ["--config", "/etc/sse-relay/config.json"]
