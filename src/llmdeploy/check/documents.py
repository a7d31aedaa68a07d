"""The check stage: validate rendered (or given) manifests offline with real validators.

* Built-in kinds: the JSON schemas bundled with ``kubernetes-validate``, strict variant (unknown
  fields are errors), at a pinned Kubernetes version. Its ``validate()`` re-reads the 1.5 MB
  ``_definitions.json`` on every call and reports only the first error, so the same schema files
  are read once per process, a validator is cached per (version, apiVersion, kind), and every
  error is reported. The verdict is jsonschema-rs's (:class:`~llmdeploy.check.crd.SchemaCheck`:
  microseconds per document); Python's jsonschema lists the errors of a rejected document
  (it took ~1.1 ms for a valid Deployment, ~6 ms on a busy machine).
* Custom kinds: the CRDs of a :class:`CrdRegistry` (see :mod:`llmdeploy.check.crd`).
* Any other kind is reported ``not-validated`` with the reason, never passed.
* Every object, whatever its kind: ``metadata`` as ObjectMeta, name and namespace syntax, label
  keys and values (kubernetes-validate checks none of these).

No printing and no exit here: the CLI turns a :class:`CheckReport` into output.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml as pyyaml

from llmdeploy.check.crd import CrdRegistry, CrdVersion, SchemaCheck, schema_error_messages
from llmdeploy.check.meta import CLUSTER_SCOPED, generic_errors
from llmdeploy.errors import CheckInputError

__all__ = [
    "DEFAULT_KUBE_VERSION",
    "CheckInputError",
    "CheckReport",
    "CrdRegistry",
    "DocResult",
    "Finding",
    "check_documents",
    "check_paths",
    "parse_documents",
    "prepare_kind",
    "rendered_documents",
]

DEFAULT_KUBE_VERSION = "1.34.0"

Status = Literal["valid", "invalid", "not-validated"]


@dataclass(frozen=True)
class Finding:
    path: str  # file name / source label
    doc_index: int
    kind: str
    name: str
    severity: Literal["error", "warning"]
    message: str


@dataclass(frozen=True)
class DocResult:
    source: str
    doc_index: int
    api_version: str
    kind: str
    name: str
    status: Status
    # "kubernetes-validate 1.34.0 strict" / "CRD karpenter.sh_nodepools.yaml" / "none"
    validator: str
    messages: tuple[str, ...]  # the errors if invalid, the reason if not-validated
    skipped_cel_rules: int
    notes: tuple[str, ...] = ()  # warnings that do not make the document invalid
    # The CRD schema used, by origin: "Karpenter v1.14.1" (bundled) or the CRD file's path.
    crd: str = ""


@dataclass(frozen=True)
class CheckReport:
    results: tuple[DocResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.status != "invalid" for r in self.results)

    @property
    def not_validated(self) -> tuple[DocResult, ...]:
        return tuple(r for r in self.results if r.status == "not-validated")

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Errors of invalid documents; reasons of not-validated ones and notes as warnings."""
        out: list[Finding] = []
        for r in self.results:
            severity: Literal["error", "warning"] = "error" if r.status == "invalid" else "warning"
            messages = r.messages if r.status != "valid" else ()
            out += [Finding(r.source, r.doc_index, r.kind, r.name, severity, m) for m in messages]
            out += [Finding(r.source, r.doc_index, r.kind, r.name, "warning", n) for n in r.notes]
        return tuple(out)


# --- built-in kinds: kubernetes-validate's bundled schemas ------------------------------------

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_DEFS_URI = "https://kubernetes.io/api/_definitions.json"


@cache
def _schema_version(kube_version: str) -> str:
    """The bundled schema version used for ``kube_version``: the newest one not newer than it
    (kubernetes-validate's rule, with numeric instead of string comparison)."""
    available = _kv_versions()  # ["1.25.0", ..., "1.37.0"]
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][\w.-]*)?", kube_version.strip())
    wanted = (int(match.group(1)), int(match.group(2))) if match else None
    usable = [v for v in available if wanted and _major_minor(v) <= wanted]
    if wanted is None or not usable or wanted > _major_minor(available[-1]):
        raise CheckInputError(
            f"Kubernetes version {kube_version!r} is not supported by kubernetes-validate "
            f"{_kv_version()} (supported: {available[0]} to {available[-1]})"
        )
    return usable[-1]


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _schema_dir(schema_version: str) -> str:
    return f"v{schema_version}-local-strict"


def _kv_version() -> str:
    """kubernetes-validate's version, for messages (importing the package would import its
    ``utils`` and Python's jsonschema)."""
    import importlib.metadata

    return importlib.metadata.version("kubernetes-validate")


class _NoSchema(Exception):
    """kubernetes-validate has no schema file for this apiVersion and kind."""


@cache
def _kv_schemas() -> Path:
    """kubernetes-validate's ``kubernetes-json-schema`` folder, found without importing the
    package (its ``__init__`` imports its ``utils`` and Python's jsonschema, which only
    explains failures now)."""
    found = importlib.util.find_spec("kubernetes_validate")
    if found is None or not found.submodule_search_locations:
        raise CheckInputError("kubernetes-validate is not installed")
    return Path(next(iter(found.submodule_search_locations))) / "kubernetes-json-schema"


def _kv_json(relative: str) -> Any:
    """One of kubernetes-validate's schema files, read as its ``utils.schema_contents`` does."""
    return json.loads((_kv_schemas() / relative).read_text(encoding="utf-8"))


@cache
def _kv_versions() -> list[str]:
    """The Kubernetes versions kubernetes-validate has strict schemas for, oldest first."""
    found = {m.group(1) for e in _kv_schemas().iterdir() if (m := _STRICT_DIR.fullmatch(e.name))}
    return sorted(found, key=_major_minor)


_STRICT_DIR = re.compile(r"v(\d+\.\d+\.\d+)-local-strict")


@cache
def _definitions(schema_version: str) -> tuple[str, Any]:
    return _DEFS_URI, _kv_json(f"{_schema_dir(schema_version)}/_definitions.json")


@cache
def _builtin_validator(schema_version: str, api_version: str, kind: str) -> SchemaCheck:
    # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = _kv_json(f"{_schema_dir(schema_version)}/{kind.lower()}-{api}.json")
    except FileNotFoundError:
        raise _NoSchema from None
    return SchemaCheck(schema, definitions=_definitions(schema_version))


@cache
def _meta_validator(schema_version: str) -> SchemaCheck:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {"metadata": {"$ref": f"{_DEFS_URI}#/$defs/{_OBJECT_META}"}},
    }
    return SchemaCheck(schema, definitions=_definitions(schema_version))


@cache
def _bundled_files(schema_version: str) -> frozenset[str]:
    folder = _kv_schemas() / _schema_dir(schema_version)
    return frozenset(entry.name for entry in folder.iterdir())


def _served_builtin_versions(schema_version: str, api_version: str, kind: str) -> list[str]:
    """Versions of the same group and kind that this Kubernetes version does serve."""
    group = api_version.rpartition("/")[0].split(".")[0]
    pattern = re.compile(
        rf"{re.escape(kind.lower())}-{re.escape(group + '-' if group else '')}"
        r"(v\d+(?:(?:alpha|beta)\d+)?)\.json"
    )
    return sorted(m.group(1) for f in _bundled_files(schema_version) if (m := pattern.fullmatch(f)))


def _is_builtin_group(group: str) -> bool:
    # Built-in groups are "" (core), dot-less (apps, batch, policy, autoscaling) or *.k8s.io.
    # Anything else (karpenter.sh, keda.sh, x-k8s.io, ...) is a CRD.
    return "." not in group or group.endswith(".k8s.io")


# --- routing -------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Plain JSON-like data: what the API server would decode (YAML dates stay strings)."""
    if isinstance(value, Mapping):
        return {_plain_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def _plain_key(key: Any) -> str:
    if isinstance(key, bool) or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    return str(key)


@dataclass
class _Schema:
    """What the schema step found: errors, or a reason it could not run."""

    validator: str = "none"
    errors: list[str] = field(default_factory=list)
    notes: tuple[str, ...] = ()
    reason: str = ""
    cluster_scoped: bool = False
    covers_metadata: bool = False  # kubernetes-validate's schemas include ObjectMeta
    crd: str = ""  # origin of the CRD schema used


def _validate_schema(
    data: dict[str, Any], api_version: str, kind: str, crds: CrdRegistry | None, version: str
) -> _Schema:
    group, _, ver = api_version.rpartition("/")
    out = _Schema(cluster_scoped=kind in CLUSTER_SCOPED)
    crd = crds.lookup(group, ver, kind) if crds is not None else None
    others = crds.versions_of(group, kind) if crds is not None else ()
    if crds is not None and crd is not None:
        outcome = crds.validate(crd, data)
        out.validator = _crd_validator(crd)
        out.crd = crd.origin
        out.errors += outcome.errors
        out.notes = outcome.skipped_rules
        out.cluster_scoped = not crd.namespaced
    elif others:
        serves = ", ".join(f"{group}/{o.version}" for o in others)
        out.validator = _crd_validator(others[0])
        out.crd = others[0].origin
        which = f"the bundled {others[0].origin} CRD" if others[0].bundled else "the CRD"
        hint = "; give --crd-dir with your cluster's CRDs" if others[0].bundled else ""
        out.errors.append(
            f"apiVersion: {api_version} {kind} is not served ({which} serves {serves}{hint})"
        )
    elif _is_builtin_group(group):
        try:
            builtin = _builtin_validator(version, api_version, kind)
        except _NoSchema:
            served = _served_builtin_versions(version, api_version, kind)
            if not served:
                out.reason = (
                    f"kubernetes-validate {_kv_version()} has no schema for "
                    f"{api_version} {kind} at Kubernetes {version}"
                )
                return out
            out.errors.append(
                f"apiVersion: {api_version} {kind} is not served by Kubernetes {version} "
                f"(served versions: {', '.join(served)})"
            )
        else:
            out.errors += schema_error_messages(builtin.iter_errors(data))
            out.covers_metadata = True
        out.validator = f"kubernetes-validate {version} strict"
    elif crds is None:
        out.reason = f"no CRD for {api_version} {kind}: no CRD directory given (--crd-dir)"
    elif crds.bundled:
        out.reason = (
            f"no CRD for {api_version} {kind} in {crds.where} (give --crd-dir with your "
            "cluster's CRDs)"
        )
    else:
        out.reason = (
            f"no CRD for {api_version} {kind} in {crds.where} (--crd-dir replaces the bundled "
            "CRD schemas)"
        )
    return out


def _crd_validator(crd: CrdVersion) -> str:
    """``CRD karpenter.sh_nodepools.yaml`` (a file), ``... (bundled, Karpenter v1.14.1)``."""
    return f"CRD {crd.source}" + (f" (bundled, {crd.origin})" if crd.bundled else "")


def _check_doc(
    source: str, index: int, doc: Any, crds: CrdRegistry | None, schema_version: str
) -> DocResult:
    data = _plain(doc)
    meta = data.get("metadata") if isinstance(data, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    api_version = data.get("apiVersion") if isinstance(data, dict) else None
    kind = data.get("kind") if isinstance(data, dict) else None
    result = partial(
        DocResult,
        source,
        index,
        str(api_version or ""),
        str(kind or ""),
        name if isinstance(name, str) else "",
    )
    if not isinstance(data, dict):
        return result("invalid", "none", ("document is not a mapping",), 0)
    if not (
        isinstance(api_version, str)
        and api_version
        and isinstance(kind, str)
        and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", kind)
    ):
        return result("invalid", "none", ("apiVersion and kind (alphanumeric) are required",), 0)
    found = _validate_schema(data, api_version, kind, crds, schema_version)
    errors = found.errors
    if not found.covers_metadata:
        errors += schema_error_messages(_meta_validator(schema_version).iter_errors(data))
    errors += generic_errors(data, kind, found.cluster_scoped)
    skipped = len(found.notes)
    if errors:
        notes = found.notes + ((found.reason,) if found.reason else ())
        return result("invalid", found.validator, tuple(errors), skipped, notes, found.crd)
    if found.reason:
        return result("not-validated", "none", (found.reason,), skipped, found.notes)
    return result("valid", found.validator, (), skipped, found.notes, found.crd)


def check_documents(
    docs: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    crds: CrdRegistry | None,
    kube_version: str = DEFAULT_KUBE_VERSION,
) -> CheckReport:
    """Check ``(source, document)`` pairs. ``doc_index`` counts documents per source.
    Raises :class:`CheckInputError` for a Kubernetes version kubernetes-validate lacks."""
    schema_version = _schema_version(kube_version)
    counters: dict[str, int] = {}
    results = []
    for source, doc in docs:
        index = counters.get(source, 0)
        counters[source] = index + 1
        results.append(_check_doc(source, index, doc, crds, schema_version))
    return CheckReport(tuple(results))


def prepare_kind(
    api_version: str, kind: str, *, crds: CrdRegistry | None, kube_version: str
) -> None:
    """Build what checking a document of ``kind`` needs (its validator; for a CRD its CEL
    programs too) without one: the cached work of the first such document, done ahead
    (:mod:`llmdeploy.check.ahead`). Changes no verdict."""
    schema_version = _schema_version(kube_version)
    group, _, version = api_version.rpartition("/")
    crd = crds.lookup(group, version, kind) if crds is not None else None
    if crds is not None and crd is not None:
        crds.prepare(crd)
        _meta_validator(schema_version)
    elif _is_builtin_group(group):
        with contextlib.suppress(_NoSchema):
            _builtin_validator(schema_version, api_version, kind)


def rendered_documents(files: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """Parse rendered YAML files back the way the cluster reads them (every document of every
    *.yaml except kustomization.yaml)."""
    docs: list[tuple[str, Any]] = []
    for name, text in files:
        if not name.endswith(".yaml") or name.endswith("kustomization.yaml"):
            continue
        docs.extend((name, doc) for _, doc in parse_documents(text, name))
    return docs


_BaseLoader: Any = getattr(pyyaml, "CSafeLoader", pyyaml.SafeLoader)  # libyaml when available


class _K8sLoader(_BaseLoader):  # type: ignore[misc]
    """PyYAML's YAML 1.1 safe loader (libyaml-backed), adjusted to read scalars as Kubernetes'
    go-yaml v2 does: ``y``/``n`` are booleans and a dotless ``1e3`` is a float. Duplicate keys
    are an error, as in the API server's strict decoding."""

    bool_values: ClassVar[dict[str, bool]] = {
        **pyyaml.constructor.SafeConstructor.bool_values,
        "y": True,
        "n": False,
    }

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                duplicate = False  # unhashable: the base class reports it
            if duplicate:
                raise pyyaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            with contextlib.suppress(TypeError):
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


_K8sLoader.yaml_implicit_resolvers = {
    k: list(v) for k, v in _BaseLoader.yaml_implicit_resolvers.items()
}
_K8sLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN")
)
_K8sLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_documents(text: str, source: str) -> list[tuple[int, Any]]:
    """Non-empty documents of a YAML stream with their 0-based position in the stream.

    Scalars follow YAML 1.1, as in Kubernetes' sigs.k8s.io/yaml: an unquoted ``yes``/``on`` is a
    boolean and ``0755`` octal, so a string rendered without quotes fails the schema here as it
    would in the cluster. (Unlike Go, ``1:30`` is read as a base-60 integer; quote it.) Parsed
    with libyaml: about 10x faster than a pure-Python parser (docs/performance.md).
    """
    try:
        docs = pyyaml.load_all(text, Loader=_K8sLoader)
        return [(i, d) for i, d in enumerate(docs) if d is not None]
    except pyyaml.YAMLError as exc:
        raise CheckInputError(f"{source}: invalid YAML: {exc}") from exc


def _manifest_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        elif path.is_file():
            files.append(path)
        else:
            raise CheckInputError(f"{path}: no such file or directory")
    return [f for f in files if f.name not in ("kustomization.yaml", "kustomization.yml")]


def check_paths(
    paths: Sequence[Path],
    *,
    crds: CrdRegistry | None,
    kube_version: str = DEFAULT_KUBE_VERSION,
) -> CheckReport:
    """Check manifest files, or directories of ``*.yaml``/``*.yml`` (recursively, without
    ``kustomization.yaml``). ``doc_index`` is the document's position in its file."""
    schema_version = _schema_version(kube_version)
    results: list[DocResult] = []
    for path in _manifest_files(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckInputError(f"{path}: cannot read: {exc}") from exc
        for index, doc in parse_documents(text, str(path)):
            results.append(_check_doc(str(path), index, doc, crds, schema_version))
    return CheckReport(tuple(results))
