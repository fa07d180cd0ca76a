#!/usr/bin/env python3
"""Lists the declarations a module uses whose Apple availability is newer than the package's floor.

check.py FLOOR SYMBOL_GRAPH_DIR TARGET AST_JSON...

FLOOR is a JSON object of the lowest versions ({"macOS": 13, "iOS": 16, ...}). The symbol graphs are the
toolchain's modules' (swift-symbolgraph-extract), which carry Apple availability even on Linux; the ASTs are
`swiftc -frontend -dump-ast -dump-ast-format json` of each module's sources, typed on Linux. A declaration
counts with the availability of its enclosing types and extensions too. Exits 1 when any use is newer.
"""
import glob
import json
import sys

# Uses that the Linux AST names but an Apple build resolves to an older declaration of the same name:
#   next(isolation:) (macOS 15): `for try await` calls it only where the deployment target has it, else next()
#   (SE-0421);
#   FixedWidthInteger's `&*` requirement (macOS 15): below that, the extension's `&*`, there since Swift 4.
RESOLVED_OLDER = {
    "s:Scs8IteratorV4next9isolationxSgScA_pSgYi_tYaq_YKF",
    "s:ScS8IteratorV4next9isolationxSgScA_pSgYi_tYaF",
    "s:s17FixedWidthIntegerP2amoiyxx_xtFZ",
}

# Uses behind `if #available` / `guard #available`, which this check cannot see, by target.
GUARDED = {
    # UTF8ValidationTests compares HTTP1's validatedUTF8String with the standard library's where it exists.
    ("HTTP1Tests", "s:SS10validating2asSSSgq__xmtcs16_UnicodeEncodingRzSTR_7ElementQy_8CodeUnitRtzr0_lufc"),
}

floor = json.loads(sys.argv[1])
target = sys.argv[3]
availability, parent = {}, {}
for path in glob.glob(sys.argv[2] + "/*.symbols.json"):
    graph = json.load(open(path))
    for symbol in graph["symbols"]:
        versions = {a["domain"]: (a["introduced"]["major"], a["introduced"].get("minor", 0))
                    for a in symbol.get("availability", []) if "introduced" in a and "domain" in a}
        availability[symbol["identifier"]["precise"]] = (versions, symbol["names"]["title"], path.split("/")[-1])
    for relation in graph.get("relationships", []):
        if relation["kind"] in ("memberOf", "defaultImplementationOf", "requirementOf", "optionalRequirementOf"):
            parent.setdefault(relation["source"], relation["target"])


def effective(usr, depth=0):
    versions = dict(availability.get(usr, ({}, None, None))[0])
    if usr in parent and depth < 10:
        for domain, version in effective(parent[usr], depth + 1).items():
            versions[domain] = max(version, versions.get(domain, (0, 0)))
    return versions


used = set()


def walk(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("decl_usr", "usr") and isinstance(value, str) and value.startswith("s:"):
                used.add(value)
            else:
                walk(value)
    elif isinstance(node, list):
        for value in node:
            walk(value)


decoder = json.JSONDecoder()
for path in sys.argv[4:]:
    text, i = open(path).read(), 0
    while True:                      # one JSON document per source file, one after the other
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            break
        document, i = decoder.raw_decode(text, i)
        walk(document)

known = sorted(u for u in used if u in availability)
newer = []
for usr in known:
    versions = {d: v for d, v in effective(usr).items() if d in floor and v > (floor[d], 0)}
    if versions and usr not in RESOLVED_OLDER and (target, usr) not in GUARDED:
        newer.append(usr)
        _, title, module = availability[usr]
        shown = ", ".join(f"{d} {v[0]}.{v[1]}" for d, v in sorted(versions.items()))
        print(f"  newer than the floor: {title} ({module.replace('.symbols.json', '')}: {shown})")
print(f"{len(known)} declarations of the toolchain's modules used, {len(newer)} newer than the floor")
sys.exit(1 if newer else 0)
