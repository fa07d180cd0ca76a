#!/usr/bin/env bash
# Checks that no target uses an API newer than the package's floor (Package.swift: macOS 13, iOS 16, tvOS 16,
# visionOS 1), without an Apple compiler: each target's sources are typed on Linux (swiftc -dump-ast, JSON) and
# every declaration they use is looked up in the toolchain's symbol graphs, which keep the Apple availability.
# It sees the standard library, Synchronization, Dispatch and Foundation as their interfaces annotate them (Linux's
# Foundation leaves most of its older API unannotated), not overload choices an Apple build would make differently
# (the two known ones are listed in check.py), nor `#available` guards (the guarded uses are listed there too).
#
# Usage: Tests/availability/check.sh [TARGET...]   (after `swift build --build-tests`; every target by default,
#        about 5 minutes on a busy 2-core machine)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export PATH="/opt/swift/usr/bin:$PATH"
FLOOR='{"macOS": 13, "iOS": 16, "tvOS": 16, "visionOS": 1}'
BUILD=$(swift build --show-bin-path)
[ -d "$BUILD/Modules" ] || { echo "build first: swift build --build-tests"; exit 1; }
grep -q '.macOS(.v13), .iOS(.v16), .tvOS(.v16), .visionOS(.v1)' Package.swift \
  || { echo "Package.swift's platforms are not the floor this check uses: $FLOOR"; exit 1; }
WORK=$(mktemp -d /tmp/availability.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

for module in Swift _Concurrency _StringProcessing Synchronization Dispatch Foundation FoundationEssentials FoundationNetworking; do
  swift-symbolgraph-extract -module-name "$module" -target "$(swift -print-target-info | sed -n 's/.*"triple": "\(.*\)".*/\1/p' | head -n 1)" \
    -output-dir "$WORK" -minimum-access-level public >/dev/null 2>&1 || { echo "no symbol graph for $module"; exit 1; }
done

# The package name SwiftPM gave the build (the `package` access level needs the same one).
PACKAGE_NAME=$(grep -o '"-package-name","[^"]*"' "$BUILD/../debug.yaml" "$ROOT/.build/debug.yaml" 2>/dev/null | head -n 1 | cut -d'"' -f4)
flags=(-I "$BUILD/Modules" -swift-version 6)
[ -n "$PACKAGE_NAME" ] && flags+=(-package-name "$PACKAGE_NAME")
# Swift Testing's macros, for the test targets.
flags+=(-plugin-path "$(dirname "$(command -v swiftc)")/../lib/swift/host/plugins")
for map in "$BUILD"/*.build/module.modulemap; do flags+=(-Xcc "-fmodule-map-file=$map"); done
for include in Sources/*/include; do flags+=(-Xcc "-I$include"); done

status=0
# Every target, the tests' too (a Mac developer builds them for the same floor); Tests/ folders without a target
# of their own (scripts, corpora) have no Swift sources.
for dir in Sources/*/ Tests/*/; do
  target=$(basename "$dir")
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$target"; then continue; fi
  primaries=()
  while IFS= read -r file; do primaries+=(-primary-file "$file"); done < <(find "$dir" -name '*.swift' | sort)
  [ ${#primaries[@]} -eq 0 ] && continue
  # What SwiftPM generates for a target with resources (`Bundle.module`).
  derived=()
  [ -d "$BUILD/$target.build/DerivedSources" ] && while IFS= read -r file; do derived+=("$file"); done \
    < <(find "$BUILD/$target.build/DerivedSources" -name '*.swift')
  kind=(-parse-as-library)
  [ -f "$dir/main.swift" ] && kind=()
  if ! swiftc -frontend -dump-ast -dump-ast-format json "${primaries[@]}" "${derived[@]}" -module-name "$target" "${flags[@]}" "${kind[@]}" \
       >"$WORK/$target.json" 2>"$WORK/$target.err"; then
    echo "FAIL    - $target: could not type its sources: $(head -n 2 "$WORK/$target.err" | tr '\n' ' ')"
    status=1
    continue
  fi
  if result=$(python3 "$ROOT/Tests/availability/check.py" "$FLOOR" "$WORK" "$target" "$WORK/$target.json"); then
    echo "ok      - $target: ${result##*$'\n'}"
  else
    echo "FAIL    - $target:"; echo "$result"
    status=1
  fi
done
exit $status
