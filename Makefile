# SSE Relay: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
APT_PACKAGES := libcurl4-openssl-dev libssl-dev curl
PORT ?= 8080
PACE_MS ?= 50

.PHONY: run test deps build release blackbox clean help

help:
	@echo "make run    - install missing system packages, build, start the relay on 127.0.0.1:$(PORT) with the fake provider"
	@echo "make test   - install missing system packages, run every test (unit, integration, black-box)"
	@echo "make release - optimised build at .build/release/sse-relay"

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
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	.build/release/sse-relay --dev --port $(PORT) --dev-pace-ms $(PACE_MS)

test: deps
	$(SWIFT) build --build-tests
	bash Tests/blackbox/run.sh .build/debug/sse-relay
	$(SWIFT) test --skip-build

blackbox: build
	bash Tests/blackbox/run.sh .build/debug/sse-relay

clean:
	rm -rf .build
