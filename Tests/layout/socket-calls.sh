#!/usr/bin/env bash
# Every socket, epoll, kqueue and pipe call of the shipped modules goes through `Syscall`
# (Sources/Transport/Syscalls.swift), where errno is read and classified in one place. Checked on what the compiler
# produced, not on names in the source: the undefined symbols (`nm -u`) of each object file of the targets under
# Sources/ (the bench and fuzz tools excepted: they are not shipped). Name resolution (getaddrinfo) and the
# logger's write to stdout/stderr are not socket calls and are not checked.
# Usage: Tests/layout/socket-calls.sh [BUILD_DIR]   (default .build/debug; run after the build). Run by `make test`.
# Exit 1 with each object file and the calls it makes itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/opt/swift/usr/bin:$PATH"
build=${1:-.build/debug}
# Syscall itself, and the C shim's accept4 wrapper (Glibc's module does not export accept4), which only
# Syscall.accept calls and whose errno it reads.
allowed="Transport.build/Syscalls.swift.o CSystem.build/csystem.c.o"
tools="relay-bench relay-fuzz CBenchSupport"
calls='socket|bind|listen|accept|accept4|connect|recv|recvfrom|recvmsg|send|sendto|sendmsg|writev|readv|setsockopt|getsockopt|shutdown|getsockname|getpeername|epoll_create|epoll_create1|epoll_ctl|epoll_wait|epoll_pwait|kqueue|kevent|pipe|pipe2|close'

scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
targets=$(swift package --scratch-path "$scratch" dump-package | python3 -c '
import json, sys
for t in json.load(sys.stdin)["targets"]:
    if t["type"] in ("regular", "executable") and not (t.get("path") or "").startswith("Tests"):
        print(t["name"])')

bad=0; objects=0
for target in $targets; do
  [[ " $tools " == *" $target "* ]] && continue
  dir="$build/${target//-/_}.build"
  [ -d "$dir" ] || { echo "socket-calls: $dir missing (build first)"; exit 1; }
  for object in "$dir"/*.o; do
    [ -e "$object" ] || continue
    objects=$((objects + 1))
    [[ " $allowed " == *" ${object#"$build"/} "* ]] && continue
    made=$(nm -u "$object" | awk '{print $2}' | grep -xE "$calls" | tr '\n' ' ' || true)
    if [ -n "$made" ]; then echo "$object calls $made(not through Syscall)"; bad=1; fi
  done
done
[ "$objects" -gt 0 ] || { echo "socket-calls: no object files under $build"; exit 1; }
[ "$bad" = 0 ] && echo "socket-calls: $objects object files of the shipped modules make no socket call but through Syscall"
exit "$bad"
