#!/usr/bin/env python3
"""Generate the CRD schemas bundled in the package (``src/llmdeploy/check/crd_schemas/``).

From the official CustomResourceDefinition YAMLs (by default ``../shared/crds``, whose README
records where each came from), keep for every kind in :data:`KINDS` what validation needs: the
``openAPIV3Schema`` of each served version, with its types, ``required``, enums, patterns,
bounds, defaults, ``nullable``, ``x-kubernetes-*`` structure markers and the
``x-kubernetes-validations`` CEL rules with their messages. Only ``description`` is dropped
(4,364 of them; LeaderWorkerSet's CRD goes from 1.3 MB to 131 kB). Written as compact JSON with
sorted keys, so the output is deterministic.

Also written: ``manifest.json`` (per kind: upstream repository, tag, commit, upstream path,
license, sha256 of the source file and of the bundled file; the index the package reads),
and ``NOTICE`` (the attribution Apache-2.0 asks for). ``LICENSE`` in the same folder is the
Apache-2.0 text, committed once.

Usage::

    python scripts/bundle_crds.py                 # (re)write the bundle from ../shared/crds
    python scripts/bundle_crds.py --source DIR    # from another copy of the CRDs
    python scripts/bundle_crds.py --check         # exit 1, naming the files, if the bundle drifted

``tests/test_crd_bundle.py`` runs ``--check`` when ``../shared/crds`` exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "src" / "llmdeploy" / "check" / "crd_schemas"
DEFAULT_SOURCE = Path(os.environ.get("LLMDEPLOY_SHARED", REPO.parent / "shared")) / "crds"
GENERATED_BY = "scripts/bundle_crds.py"


@dataclass(frozen=True)
class Project:
    name: str  # as written in notes: "Karpenter v1.14.1"
    folder: str  # its folder in the source directory
    repo: str
    tag: str
    commit: str
    license: str
    notice: str  # the upstream NOTICE file's text, "" when the repository has none


@dataclass(frozen=True)
class Kind:
    project: Project
    upstream_dir: str
    name: str  # the CRD file's name, e.g. "karpenter.sh_nodepools.yaml"

    @property
    def file(self) -> str:  # path under the source directory
        return f"{self.project.folder}/{self.name}"

    @property
    def upstream_path(self) -> str:
        return f"{self.upstream_dir}/{self.name}"


# Pinned versions: the ones llmdeploy's output targets (shared/crds/README.md records the same
# repository, tag and commit; `main` refuses a source whose README disagrees).
KARPENTER = Project(
    "Karpenter",
    "karpenter",
    "github.com/aws/karpenter-provider-aws",
    "v1.14.1",
    "bde00654cd316fddb3dccfba3f5ac07039865429",
    "Apache-2.0",
    "Karpenter\nCopyright Amazon.com, Inc. or its affiliates. All Rights Reserved.",
)
KEDA = Project(
    "KEDA",
    "keda",
    "github.com/kedacore/keda",
    "v2.20.2",
    "68a5b5028f35b22d50597c69819ab32c4e92f21a",
    "Apache-2.0",
    "",
)
PROMETHEUS_OPERATOR = Project(
    "prometheus-operator",
    "prometheus-operator",
    "github.com/prometheus-operator/prometheus-operator",
    "v0.93.0",
    "f8fafd475f3d132e239432ae6172de60a6cb6516",
    "Apache-2.0",
    "",
)
LWS = Project(
    "LWS",
    "lws",
    "github.com/kubernetes-sigs/lws",
    "v0.10.0",
    "2161f38ff333f9e24d3c44adef7cd5d9787cac00",
    "Apache-2.0",
    "",
)

_KARPENTER_DIR = "pkg/apis/crds"
_KUBEBUILDER_DIR = "config/crd/bases"  # KEDA, LWS
_PROMETHEUS_DIR = "example/prometheus-operator-crd"
KINDS = (
    Kind(KARPENTER, _KARPENTER_DIR, "karpenter.k8s.aws_ec2nodeclasses.yaml"),
    Kind(KARPENTER, _KARPENTER_DIR, "karpenter.sh_nodepools.yaml"),
    Kind(KARPENTER, _KARPENTER_DIR, "karpenter.sh_nodeclaims.yaml"),
    Kind(KEDA, _KUBEBUILDER_DIR, "keda.sh_scaledobjects.yaml"),
    Kind(KEDA, _KUBEBUILDER_DIR, "keda.sh_triggerauthentications.yaml"),
    Kind(KEDA, _KUBEBUILDER_DIR, "keda.sh_clustertriggerauthentications.yaml"),
    Kind(PROMETHEUS_OPERATOR, _PROMETHEUS_DIR, "monitoring.coreos.com_servicemonitors.yaml"),
    Kind(PROMETHEUS_OPERATOR, _PROMETHEUS_DIR, "monitoring.coreos.com_podmonitors.yaml"),
    Kind(LWS, _KUBEBUILDER_DIR, "leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
)


# --- stripping -------------------------------------------------------------------------------

_SUBSCHEMA = ("items", "additionalProperties", "not")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def strip_schema(node: Any) -> Any:
    """The schema without ``description``. Walks the schema's structure, so a *property* named
    ``description`` (or ``type``, ``default``) is kept: only keywords are dropped."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {name: strip_schema(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA:
            out[key] = strip_schema(value)
        elif key in _SUBSCHEMA_LISTS:
            out[key] = [strip_schema(sub) for sub in value]
        else:  # enum, default, required, x-kubernetes-validations, ...: data, kept as is
            out[key] = value
    return out


# --- the bundle ------------------------------------------------------------------------------


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _crd(path: Path) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 1.3 MB in 0.3 s, not 4 s
    docs = [d for d in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader) if d]
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    if len(crds) != 1:
        raise SystemExit(f"{path}: expected one CustomResourceDefinition, found {len(crds)}")
    crd: dict[str, Any] = crds[0]
    return crd


def bundle(source: Path) -> dict[str, str]:
    """File name -> text of every generated file of the bundle (LICENSE excluded)."""
    files: dict[str, str] = {}
    index: list[dict[str, Any]] = []
    for kind in KINDS:
        path = source / kind.file
        raw = path.read_bytes()
        crd = _crd(path)
        spec = crd["spec"]
        versions = {
            str(v["name"]): strip_schema(v["schema"]["openAPIV3Schema"])
            for v in spec["versions"]
            if v.get("served", False)
        }
        out_name = Path(kind.name).with_suffix(".json").name
        text = _dump(
            {
                "group": spec["group"],
                "kind": spec["names"]["kind"],
                "scope": spec["scope"],
                "versions": versions,
            }
        )
        files[out_name] = text
        project = kind.project
        index.append(
            {
                "kind": spec["names"]["kind"],
                "group": spec["group"],
                "versions": sorted(versions),
                "scope": spec["scope"],
                "file": out_name,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "project": f"{project.name} {project.tag}",
                "source": {
                    "repo": project.repo,
                    "tag": project.tag,
                    "commit": project.commit,
                    "path": kind.upstream_path,
                    "file": kind.name,
                    "license": project.license,
                    "sha256": hashlib.sha256(raw).hexdigest(),
                    "bytes": len(raw),
                },
            }
        )
    files["manifest.json"] = (
        json.dumps(
            {
                "generated_by": GENERATED_BY,
                "modification": "descriptions removed; YAML converted to JSON; only "
                "spec.group, spec.names.kind, spec.scope and each served version's "
                "openAPIV3Schema kept",
                "kinds": index,
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    files["NOTICE"] = _notice()
    return files


def _notice() -> str:
    projects = list(dict.fromkeys(k.project for k in KINDS))
    lines = [
        "The files in this folder other than LICENSE and NOTICE are derived from the",
        "CustomResourceDefinitions of the projects below, each licensed under the Apache License,",
        "Version 2.0 (the text is in LICENSE beside this file). They were modified: descriptions",
        f"removed and the YAML converted to JSON, by {GENERATED_BY}. manifest.json names, per",
        "kind, the upstream file, its commit and its sha256.",
        "",
    ]
    for project in projects:
        kinds = ", ".join(str(_kind_name(k)) for k in KINDS if k.project == project)
        lines.append(f"{project.name} {project.tag} ({project.repo} at {project.commit}): {kinds}")
        if project.notice:
            lines += [
                "  Its NOTICE file reads:",
                *(f"    {ln}" for ln in project.notice.splitlines()),
            ]
        else:
            lines.append("  (no NOTICE file in the repository)")
    return "\n".join(lines) + "\n"


def _kind_name(kind: Kind) -> str:
    # "karpenter.sh_nodepools.yaml" -> "nodepools.karpenter.sh", the CRD's own name
    group, _, plural = Path(kind.name).stem.partition("_")
    return f"{plural}.{group}"


# --- provenance cross-check ------------------------------------------------------------------


def check_source_readme(source: Path) -> list[str]:
    """Disagreements between :data:`KINDS` and the source's README table (tag, commit, path,
    sha256 prefix); none when there is no README."""
    readme = source / "README.md"
    if not readme.is_file():
        return []
    rows: dict[str, list[str]] = {}
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0].endswith(".yaml"):
            rows[cells[0]] = cells
    problems: list[str] = []
    for kind in KINDS:
        row = rows.get(kind.file)
        if row is None:
            problems.append(f"{readme}: no row for {kind.file}")
            continue
        _, _, repo, tag, commit, path, _, sha = row[:8]
        expected = (kind.project.repo, kind.project.tag, kind.project.commit, kind.upstream_path)
        if (repo, tag, commit, path) != expected:
            problems.append(f"{readme}: {kind.file}: {(repo, tag, commit, path)} != {expected}")
        digest = hashlib.sha256((source / kind.file).read_bytes()).hexdigest()
        if not re.fullmatch(r"[0-9a-f]{16}", sha) or not digest.startswith(sha):
            problems.append(f"{kind.file}: sha256 {digest[:16]} is not the README's {sha}")
    return problems


def drift(files: Mapping[str, str], folder: Path) -> list[str]:
    """Generated files that differ from, are missing from or are extra in ``folder``."""
    found = {p.name for p in folder.iterdir() if p.is_file()} if folder.is_dir() else set()
    problems = [
        f"{name}: {'missing' if name not in found else 'differs'}"
        for name, text in sorted(files.items())
        if name not in found or (folder / name).read_text(encoding="utf-8") != text
    ]
    problems += [f"{name}: not generated" for name in sorted(found - set(files) - {"LICENSE"})]
    if "LICENSE" not in found:
        problems.append("LICENSE: missing (the Apache-2.0 text)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="official CRDs")
    parser.add_argument("--out", type=Path, default=BUNDLE, help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help="fail if the bundle drifted")
    args = parser.parse_args(argv)
    problems = check_source_readme(args.source)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    files = bundle(args.source)
    if args.check:
        problems = drift(files, args.out)
        for problem in problems:
            print(f"{args.out / problem}", file=sys.stderr)
        if problems:
            print(f"run: python {GENERATED_BY}", file=sys.stderr)
        return 1 if problems else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
    for extra in drift(files, args.out):
        print(f"{args.out / extra}", file=sys.stderr)
    size = sum(len(t.encode()) for t in files.values())
    print(f"wrote {len(files)} files ({size} bytes) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
