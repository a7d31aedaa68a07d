#!/usr/bin/env bash
# Security scan of what llmdeploy renders: every preset is rendered with the project's own
# llmdeploy (the active virtual environment's `python -m llmdeploy`), then scanned by checkov's
# Kubernetes checks. A failed check fails the scan (exit 1) unless its ID is listed, with the
# reason, in docs/security-allowlist.txt; docs/security.md explains every listed ID.
#
# checkov pins many dependencies, so it lives in its own virtual environment (.checkov-venv,
# reused while it holds the pinned version). pip install is the only network access: the scan
# runs with --skip-download, BC_SKIP_MAPPING=TRUE, no API key and no update check.
#
# Usage: bash scripts/checkov-scan.sh [PRESET ...]     (default: every presets/*.yaml)
# Environment: PYTHON (default: python from PATH, i.e. the active venv), CHECKOV_VENV,
#              LLMDEPLOY_CRD_DIR (read by llmdeploy: CRDs to validate the render against
#              instead of the bundled CRD schemas),
#              CHECKOV_ALLOWLIST (default docs/security-allowlist.txt).
set -euo pipefail

CHECKOV_VERSION="3.3.30"

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
PYTHON="${PYTHON:-python}"
VENV="${CHECKOV_VENV:-$ROOT/.checkov-venv}"
ALLOWLIST="${CHECKOV_ALLOWLIST:-$ROOT/docs/security-allowlist.txt}"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "checkov-scan: $PYTHON not found; activate the project's virtual environment" >&2
  exit 2
fi
if [ ! -f "$ALLOWLIST" ]; then
  echo "checkov-scan: $ALLOWLIST is missing" >&2
  exit 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/llmdeploy-checkov.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# --- checkov, in its own venv -----------------------------------------------------------------
installed=""
if [ -x "$VENV/bin/checkov" ]; then
  installed="$("$VENV/bin/checkov" --version 2>/dev/null || true)"
fi
if [ "$installed" != "$CHECKOV_VERSION" ]; then
  echo "== installing checkov $CHECKOV_VERSION into $VENV =="
  start=$SECONDS
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
      "checkov==$CHECKOV_VERSION" >"$WORK/pip.log" 2>&1; then
    cat "$WORK/pip.log" >&2
    echo "checkov-scan: pip install checkov==$CHECKOV_VERSION failed" >&2
    exit 2
  fi
  echo "checkov $CHECKOV_VERSION installed in $((SECONDS - start)) s"
else
  echo "== checkov $CHECKOV_VERSION already in $VENV =="
fi

# --- offline: no platform download, no mapping fetch, no update check, no API key ------------
export BC_SKIP_MAPPING=TRUE
export CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE
export ANSI_COLORS_DISABLED=1
unset BC_API_KEY PRISMA_API_URL BC_API_URL CKV_CHECK CKV_SKIP_CHECK 2>/dev/null || true

# --- render every preset ----------------------------------------------------------------------

presets=("$@")
all_presets=0
if [ "${#presets[@]}" -eq 0 ]; then
  all_presets=1
  for f in "$ROOT"/presets/*.yaml; do
    presets+=("$(basename "$f" .yaml)")
  done
fi
if [ "${#presets[@]}" -eq 0 ]; then
  echo "checkov-scan: no presets found under presets/" >&2
  exit 2
fi

scan_start=$SECONDS
for name in "${presets[@]}"; do
  out="$WORK/rendered/$name"
  if ! "$PYTHON" -m llmdeploy render --preset "$name" -o "$out" \
      >"$WORK/$name.render.log" 2>&1; then
    echo "checkov-scan: rendering preset $name failed:" >&2
    cat "$WORK/$name.render.log" >&2
    exit 1
  fi
  set +e
  "$VENV/bin/checkov" -d "$out" --framework kubernetes --quiet --compact --skip-download \
    -o json >"$WORK/$name.json" 2>"$WORK/$name.err"
  rc=$?
  set -e
  # 0: no failed check, 1: failed checks (judged below against the allowlist), else: crash.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
    echo "checkov-scan: checkov exited $rc on preset $name:" >&2
    cat "$WORK/$name.err" >&2
    exit 1
  fi
done
echo "scanned ${#presets[@]} preset(s) in $((SECONDS - scan_start)) s"

# --- judge: summary table, unexplained findings, stale allowlist entries ----------------------
"$VENV/bin/python" - "$ALLOWLIST" "$WORK" "$all_presets" "${presets[@]}" <<'PY'
import json
import re
import sys
from pathlib import Path

allowlist_path, work = Path(sys.argv[1]), Path(sys.argv[2])
all_presets, presets = sys.argv[3] == "1", sys.argv[4:]

ENTRY = re.compile(r"^(CKV2?_K8S_[0-9]+)\s+#\s*(\S.*)$")
allowed: dict[str, str] = {}
problems: list[str] = []
for number, raw in enumerate(allowlist_path.read_text(encoding="utf-8").splitlines(), 1):
    line = raw.strip()
    if not line or line.startswith("#"):
        continue
    match = ENTRY.match(line)
    if match is None:
        problems.append(f"{allowlist_path.name}:{number}: expected 'CKV_K8S_NN  # reason': {raw}")
        continue
    allowed[match.group(1)] = match.group(2)


def reports(data: object) -> list[dict]:
    """checkov prints one report object, or a list of them (one per check type)."""
    items = data if isinstance(data, list) else [data]
    return [r for r in items if isinstance(r, dict)]


rows = []
unexplained = []
fired: set[str] = set()
for name in presets:
    data = json.loads((work / f"{name}.json").read_text(encoding="utf-8"))
    passed = failed = skipped = parse_errors = resources = allowlisted = 0
    for report in reports(data):
        summary = report.get("summary", {})
        passed += int(summary.get("passed", 0))
        skipped += int(summary.get("skipped", 0))
        parse_errors += int(summary.get("parsing_errors", 0))
        resources += int(summary.get("resource_count", 0))
        for check in report.get("results", {}).get("failed_checks", []):
            failed += 1
            fired.add(check["check_id"])
            if check["check_id"] in allowed:
                allowlisted += 1
            else:
                unexplained.append((name, check))
    if resources == 0:
        problems.append(f"{name}: checkov found no Kubernetes resources to scan")
    if parse_errors:
        problems.append(f"{name}: checkov could not parse {parse_errors} file(s)")
    rows.append((name, resources, passed, failed, allowlisted, failed - allowlisted, skipped))

header = ("preset", "objects", "passed", "failed", "allowlisted", "unexplained", "skipped")
widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
print()
for row in [header, *rows]:
    print("  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w)
                    for i, (v, w) in enumerate(zip(row, widths))))
print()

for cid in sorted(fired & allowed.keys()):
    print(f"allowlisted {cid}: {allowed[cid]}")
for cid in sorted(allowed.keys() - fired) if all_presets else ():
    print(f"warning: allowlisted {cid} did not fire on any preset; remove it from "
          f"{allowlist_path.name} and docs/security.md if it is fixed")

if unexplained:
    print()
    print(f"FAILED: {len(unexplained)} finding(s) not in {allowlist_path.name}:")
    for name, check in unexplained:
        print(f"  {name}: {check['check_id']} {check.get('check_name', '')}")
        print(f"      {check.get('resource', '?')} in {check.get('file_path', '?')}")
    print("Fix the template or plan, or add the ID with its reason to the allowlist and "
          "docs/security.md.")
for p in problems:
    print(f"error: {p}")
sys.exit(1 if unexplained or problems else 0)
PY
