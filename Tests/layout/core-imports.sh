#!/usr/bin/env bash
# The relay's pure core (Sources/RelayCore) does no I/O of its own: values in, decisions out. Checked two ways:
#   1. Package.swift: no target RelayCore depends on, directly or through another target, is an I/O module;
#   2. its sources: no file imports an I/O module or the C library, and none names a Dispatch, file, process,
#      socket or thread API. Foundation is imported by the configuration reader only (JSONSerialization, Data);
#      on Linux it re-exports Dispatch, which is why the second check reads the names too.
# Exit 1 with each violation named. Run by `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/opt/swift/usr/bin:$PATH"
io_modules="Transport HTTPServer Upstream Redis CCurl CSystem RelayState Relay RelayDev"
bad=0

scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
deps=$(swift package --scratch-path "$scratch" dump-package | python3 -c '
import json, sys
targets = {t["name"]: t for t in json.load(sys.stdin)["targets"]}
def direct(name):
    out = []
    for d in targets[name].get("dependencies", []):
        for kind in ("byName", "target", "product"):
            if kind in d: out.append(d[kind][0])
    return [n for n in out if n in targets]
seen, todo = set(), ["RelayCore"]
while todo:
    for d in direct(todo.pop()):
        if d not in seen: seen.add(d); todo.append(d)
print(" ".join(sorted(seen)))')
for m in $io_modules; do
  if [[ " $deps " == *" $m "* ]]; then echo "Package.swift: RelayCore depends on I/O module $m (its dependencies: $deps)"; bad=1; fi
done

forbidden_imports="Dispatch Glibc Musl Darwin FoundationNetworking $io_modules"
forbidden_names='DispatchQueue|DispatchSource|DispatchTime|DispatchGroup|FileManager|FileHandle|ProcessInfo|Data\(contentsOf|String\(contentsOf|URLSession|Thread\b|pthread_|socket\(|epoll_|getenv\(|fopen\('
while IFS= read -r -d '' file; do
  for m in $forbidden_imports; do
    if grep -qE "^\s*(@testable |@_exported |@_implementationOnly )?import (class |struct |enum |func )?$m(\.|\s*$)" "$file"; then
      echo "$file: imports $m"; bad=1
    fi
  done
  if grep -nE "$forbidden_names" "$file" | grep -vE '^[0-9]+:\s*//' ; then
    echo "$file: names an I/O API (lines above)"; bad=1
  fi
done < <(find Sources/RelayCore -name '*.swift' -print0)

if [ "$bad" = 0 ]; then
  foundation=$(grep -rlE '^import Foundation' Sources/RelayCore | grep -vc '^Sources/RelayCore/Configuration/' || true)
  if [ "$foundation" != 0 ]; then
    echo "Foundation is imported outside the configuration reader:"; grep -rlE '^import Foundation' Sources/RelayCore | grep -v '^Sources/RelayCore/Configuration/'
    exit 1
  fi
  echo "core-imports: Sources/RelayCore ($(find Sources/RelayCore -name '*.swift' | wc -l) files) imports no I/O module, and Foundation only in Configuration/; its targets: $deps"
fi
exit "$bad"
