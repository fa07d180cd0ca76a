# SSE Relay: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
APT_PACKAGES := libcurl4-openssl-dev libssl-dev curl openssl python3-h2 python3-venv redis-server nginx
# macOS ships libcurl; OpenSSL (for the auth module) comes from Homebrew: `brew install openssl@3`.
ifeq ($(shell uname),Darwin)
OPENSSL_PREFIX ?= $(shell brew --prefix openssl@3 2>/dev/null)
SWIFT_FLAGS += -Xcc -I$(OPENSSL_PREFIX)/include -Xlinker -L$(OPENSSL_PREFIX)/lib
endif
PORT ?= 8080
PACE_MS ?= 50

.PHONY: run test deps build release blackbox bench bench-tls fuzz fuzz-cbor sanitize check-deploy smoke clean help

help:
	@echo "make run          - install missing system packages, build, start the relay on 127.0.0.1:$(PORT) with the fake provider"
	@echo "make test         - install missing system packages, run every test (unit, integration, black-box, fuzz corpus)"
	@echo "make deps         - install the Debian packages the build and tests need (only those missing)"
	@echo "make build        - debug build"
	@echo "make release      - optimised build at .build/release/sse-relay"
	@echo "make blackbox     - the black-box checks against the built binary"
	@echo "make bench        - relay vs nginx vs HAProxy vs direct benchmark (BENCH_QUICK=1 for a short run; BENCH_INSTRUCTIONS=1 adds instruction counts, =only runs just those, ~35 s)"
	@echo "make bench-tls    - cancel latency to an HTTPS upstream over HTTP/1.1 and HTTP/2"
	@echo "make fuzz         - libFuzzer on the request parser (FUZZ_SECONDS=60)"
	@echo "make fuzz-cbor    - libFuzzer on the App Attest CBOR reader and verifier (FUZZ_SECONDS=60)"
	@echo "make sanitize     - every test under Thread Sanitizer, then Address Sanitizer"
	@echo "make check-deploy - container and manifest checks outside Docker"
	@echo "make smoke URL=… TOKEN=… - one streamed request against a deployed relay"
	@echo "make clean        - remove .build"
	@echo "swift run relay-chat --url http://127.0.0.1:$(PORT) \"hi\" - stream one answer through a running relay with the Swift client library"

# Installs the Debian packages the build needs, only if one is missing (macOS ships libcurl: nothing to do).
deps:
	@if [ "$$(uname)" = "Linux" ] && command -v dpkg >/dev/null; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	  fi; \
	fi

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

release: deps
	$(SWIFT) build -c release $(SWIFT_FLAGS)

run: release
	.build/release/sse-relay --dev --port $(PORT) --dev-pace-ms $(PACE_MS)

test: deps
	bash Tests/layout/core-imports.sh
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	bash Tests/layout/socket-calls.sh
	bash Tests/blackbox/run.sh .build/debug/sse-relay
	bash Tests/blackbox/heartbeats.sh .build/debug/sse-relay
	.build/debug/relay-fuzz Tests/fuzz/corpus
	.build/debug/relay-fuzz --cbor Tests/fuzz/cbor-corpus
	$(SWIFT) test --skip-build $(SWIFT_FLAGS)

blackbox: build
	bash Tests/blackbox/run.sh .build/debug/sse-relay

# Performance benchmark (relay vs nginx vs HAProxy vs direct), not part of `make test`; BENCH_QUICK=1 for a short run.
bench: deps
	bash Tests/bench/run.sh

# Cancel latency over TLS (client close -> HTTPS upstream sees RST_STREAM or close), httpVersion 1.1 vs 2.
bench-tls: release
	/usr/bin/python3 Tests/bench/tls_cancel.py .build/release/sse-relay

# libFuzzer on the request parser and chunked decoder. Grows a working corpus from Tests/fuzz/corpus;
# a crash leaves its input in .build/fuzz/artifacts/ (replay it: .build/debug/relay-fuzz FILE).
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -Xswiftc -sanitize=fuzzer,address -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp -Xswiftc -DFUZZING
fuzz: deps
	$(SWIFT) build -c release --product relay-fuzz --scratch-path .build/fuzz $(FUZZ_FLAGS)
	mkdir -p .build/fuzz/corpus .build/fuzz/artifacts
	cp -n Tests/fuzz/corpus/* .build/fuzz/corpus/
	.build/fuzz/release/relay-fuzz .build/fuzz/corpus -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=.build/fuzz/artifacts/ -print_final_stats=1

# libFuzzer on App Attest input: the CBOR reader, authenticator data, and attestation and assertion verification.
# Grows a working corpus from Tests/fuzz/cbor-corpus; a crash leaves its input in .build/fuzz/cbor-artifacts/
# (replay it: .build/debug/relay-fuzz --cbor FILE).
fuzz-cbor: deps
	$(SWIFT) build -c release --product relay-fuzz --scratch-path .build/fuzz $(FUZZ_FLAGS)
	mkdir -p .build/fuzz/cbor-corpus .build/fuzz/cbor-artifacts
	cp -n Tests/fuzz/cbor-corpus/* .build/fuzz/cbor-corpus/
	.build/fuzz/release/relay-fuzz --cbor .build/fuzz/cbor-corpus -max_len=20000 -max_total_time=$(FUZZ_SECONDS) \
	  -artifact_prefix=.build/fuzz/cbor-artifacts/ -print_final_stats=1

# Every test under Thread Sanitizer, then under Address Sanitizer (each in its own build folder). The client's
# suites run apart with full allocation stacks (fast_unwind_on_malloc=0; relay-chat inherits it): libcurl has no
# frame pointers, so the default unwinder stops inside it and the suppression of FoundationNetworking's own leak
# (Tests/sanitizers/lsan.supp) could not see its frame. The rest keeps the fast unwinder: full stacks on every
# allocation would make the run several times longer.
#
# First, a C check of the OpenSSL shim's exit-time setting (Tests/sanitizers/openssl_exit_thread.c): a thread that
# used OpenSSL and ends while the process exits must free its OpenSSL state. In the test process such a thread
# ends only by chance in that window, so the Swift suites cannot show it every time.
LSAN_SETTINGS := suppressions=$(CURDIR)/Tests/sanitizers/lsan.supp
CLANG ?= clang
sanitize: deps
	@date -u +'== %T sanitize: OpenSSL thread state at exit (AddressSanitizer, C)'
	mkdir -p .build/asan
	$(CLANG) -fsanitize=address -fuse-ld=lld -g -Wall -Wextra -Werror -ISources/COpenSSL/include \
	  Tests/sanitizers/openssl_exit_thread.c Sources/COpenSSL/shim.c -lssl -lcrypto -lpthread -o .build/asan/openssl-exit-thread
	.build/asan/openssl-exit-thread
	@date -u +'== %T sanitize: ThreadSanitizer build'
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan
	@date -u +'== %T sanitize: ThreadSanitizer tests'
	$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan
	@date -u +'== %T sanitize: AddressSanitizer build'
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan
	@date -u +'== %T sanitize: AddressSanitizer tests'
	LSAN_OPTIONS=$(LSAN_SETTINGS) $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan --skip SSERelayClientTests
	LSAN_OPTIONS=$(LSAN_SETTINGS) ASAN_OPTIONS=fast_unwind_on_malloc=0 \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan --filter SSERelayClientTests
	@date -u +'== %T sanitize: done'

# Container and manifest checks outside Docker (slow; not part of `make test`). See deploy/README.md.
check-deploy: deps
	bash deploy/check-manifests.sh
	bash deploy/check-image-steps.sh

smoke:
	bash deploy/smoke.sh $(URL) $(TOKEN)

clean:
	rm -rf .build
