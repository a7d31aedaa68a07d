"""Validate custom resources against CRD ``openAPIV3Schema`` the way the API server does.

Used by :mod:`llmdeploy.check.documents`. What is emulated, in the API server's order:

1. Nulls on non-nullable fields are pruned, then schema ``default`` values are applied.
2. Structural schema: an object is closed (unknown fields are errors, as with ``kubectl apply``'s
   default ``--validate=strict``) unless it has ``x-kubernetes-preserve-unknown-fields: true`` or an
   ``additionalProperties`` schema. ``x-kubernetes-int-or-string`` and ``nullable`` are honoured,
   ``x-kubernetes-list-type: set|map`` must be unique. ``format`` is not checked.
3. ``x-kubernetes-validations`` CEL rules run with Google's cel-expr-python, with cel-go's strings
   extension and Kubernetes' ``find``/``findAll`` (:mod:`llmdeploy.check.cel`).
   Transition rules (``oldSelf``) do not apply on create and are not run. A rule that uses a
   function of another Kubernetes library (``isQuantity``, ``format.named``, ...) is *skipped and
   counted*, never passed silently. Rules under a subtree that already has a schema error are
   not run.

The root ``metadata`` is validated by the caller (ObjectMeta, scope, name rules).

Cost: a CEL evaluation takes ~10 us in cel-expr-python (it took ~1 ms in cel-python, the
evaluator before issue 25); results are still memoized per (schema node, rule, value).
Schemas are read on first use: the bundled set (:mod:`llmdeploy.check.bundled`) per kind;
``from_dirs`` parses every file it is given (the ten shared CRD files, 2.3 MB, in ~0.3 s).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped, unused-ignore]

from llmdeploy.errors import CheckInputError

_OLD_SELF = re.compile(r"\boldSelf\b")  # transition rules: not run on create

# Path elements into a JSON document: keys and list indexes.
JsonPath = tuple[str | int, ...]


def json_path(parts: Iterable[str | int]) -> str:
    """``("spec", "triggers", 0, "type")`` -> ``spec.triggers[0].type``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def schema_error_messages(errors: Iterable[Any]) -> list[str]:
    """Readable, sorted, de-duplicated messages for ``jsonschema.ValidationError`` objects."""
    messages: set[str] = set()
    for err in errors:
        path: JsonPath = tuple(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = err.schema.get("properties", {})
            for key in err.instance:
                if key not in known:
                    messages.add(f'unknown field "{json_path((*path, key))}"')
        else:
            where = json_path(path)
            messages.add(f"{where}: {err.message}" if where else err.message)
    return sorted(messages)


_RS_REGISTRIES: dict[tuple[str, int], tuple[Mapping[str, Any], Any]] = {}


def _rs_registry(uri: str, document: Mapping[str, Any]) -> Any:
    """jsonschema-rs's registry of one document, built once per document: building it copies
    the whole document into Rust (kubernetes-validate's ``_definitions.json`` is 1.4 MB, about
    15 ms), and every built-in kind's validator points into the same one."""
    import jsonschema_rs

    key = (uri, id(document))
    hit = _RS_REGISTRIES.get(key)
    if hit is None or hit[0] is not document:
        hit = (document, jsonschema_rs.Registry([(uri, dict(document))]))
        _RS_REGISTRIES[key] = hit  # the document is kept, so its id is never reused
    return hit[1]


class SchemaCheck:
    """A JSON Schema applied by jsonschema-rs (Rust, issue 25); when it rejects a document,
    Python's jsonschema, imported only then, lists the errors, so the messages are the ones
    llmdeploy always printed. ``tests/test_schema_check.py`` proves both give the same verdict
    on the bundled CRD schemas and on kubernetes-validate's.

    ``draft7``: the CRD schemas converted by :func:`_to_jsonschema` (Draft 7, as before);
    otherwise Draft 2020-12 (kubernetes-validate's), with ``definitions`` the ``(uri, schema)``
    of the document its ``$ref`` point into. ``format`` is never asserted, as in Python's
    validators without a format checker."""

    def __init__(
        self,
        schema: Mapping[str, Any],
        *,
        draft7: bool = False,
        definitions: tuple[str, Mapping[str, Any]] | None = None,
    ) -> None:
        import jsonschema_rs

        self.schema, self.draft7, self.definitions = schema, draft7, definitions
        self._fast: Any
        if draft7:
            self._fast = jsonschema_rs.Draft7Validator(dict(schema), validate_formats=False)
        else:
            registry = None if definitions is None else _rs_registry(*definitions)
            self._fast = jsonschema_rs.Draft202012Validator(
                dict(schema), registry=registry, validate_formats=False
            )

    @cached_property
    def _explainer(self) -> Any:
        import jsonschema

        if self.draft7:
            return jsonschema.Draft7Validator(self.schema)
        from referencing import Registry, Resource

        registry: Registry[Any] = Registry()
        if self.definitions is not None:
            registry = Resource.from_contents(self.definitions[1]) @ registry
        return jsonschema.Draft202012Validator(self.schema, registry=registry)

    def is_valid(self, data: Any) -> bool:
        try:
            return bool(self._fast.is_valid(data))
        except ValueError:  # a value JSON has no type for: let the explainer decide
            return not any(True for _ in self._explainer.iter_errors(data))

    def iter_errors(self, data: Any) -> list[Any]:
        """``jsonschema.ValidationError`` objects (none for a valid document)."""
        return [] if self.is_valid(data) else list(self._explainer.iter_errors(data))


@dataclass(frozen=True)
class CrdVersion:
    """One served version of one CRD. Its schema is read on first use (the bundled set indexes
    nine kinds but a render reads only the four or five it validates)."""

    source: str  # CRD file name, e.g. "karpenter.sh_nodepools.yaml"
    group: str
    version: str
    kind: str
    namespaced: bool
    load: Callable[[], Mapping[str, Any]] = field(repr=False, compare=False)
    # Where the schema comes from, for notes: "Karpenter v1.14.1" (bundled) or the CRD file path.
    origin: str = ""
    bundled: bool = False

    @cached_property
    def schema(self) -> Mapping[str, Any]:
        return self.load()


@dataclass(frozen=True)
class CrdOutcome:
    errors: tuple[str, ...]
    skipped_rules: tuple[str, ...]  # one note per distinct rule that could not be evaluated


class CrdRegistry:
    """CRD schemas indexed by (group, version, kind). Load once and reuse: compiled validators and
    CEL programs are cached on first use."""

    def __init__(
        self, versions: Iterable[CrdVersion], sources: Sequence[Path] = (), *, bundled: bool = False
    ) -> None:
        self.sources = tuple(sources)
        self.bundled = bundled  # the schemas shipped in the package (check/bundled.py)
        self._versions: dict[tuple[str, str, str], CrdVersion] = {}
        for crd in versions:  # first definition wins
            self._versions.setdefault((crd.group, crd.version, crd.kind), crd)
        self._validators: dict[tuple[str, str, str], SchemaCheck] = {}
        self._rule_cache: dict[tuple[int, str, bytes], tuple[str, str]] = {}

    @classmethod
    def from_dirs(cls, dirs: Sequence[Path]) -> CrdRegistry:
        """Read every ``*.yaml``/``*.yml`` under ``dirs`` (recursively, multi-document files
        allowed) and index the served versions of each ``CustomResourceDefinition``. Raises
        :class:`CheckInputError` for a missing directory, an unreadable file or invalid YAML."""
        versions: list[CrdVersion] = []
        for directory in dirs:
            if not directory.is_dir():
                raise CheckInputError(f"{directory}: CRD directory not found")
            files = sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml"))
            for path in files:
                versions.extend(_crd_versions(path))
        return cls(versions, dirs)

    def __len__(self) -> int:
        return len(self._versions)

    @property
    def where(self) -> str:
        """``the bundled CRD schemas`` or ``DIR[, DIR...]``: "no CRD for X in {where}"."""
        if self.bundled:
            return "the bundled CRD schemas"
        return ", ".join(str(d) for d in self.sources) or "the CRD registry"

    @property
    def label(self) -> str:
        """``the bundled CRD schemas`` or ``the CRDs in DIR[, DIR...]``: "validated with ..."."""
        return self.where if self.bundled else f"the CRDs in {self.where}"

    @property
    def origins(self) -> tuple[str, ...]:
        """Every distinct :attr:`CrdVersion.origin`, in the order the CRDs were given."""
        return tuple(dict.fromkeys(c.origin for c in self._versions.values()))

    def lookup(self, group: str, version: str, kind: str) -> CrdVersion | None:
        return self._versions.get((group, version, kind))

    def versions_of(self, group: str, kind: str) -> tuple[CrdVersion, ...]:
        """Every served version of ``kind`` in ``group``, sorted by version name."""
        found = [c for (g, _, k), c in self._versions.items() if (g, k) == (group, kind)]
        return tuple(sorted(found, key=lambda c: c.version))

    def _validator(self, crd: CrdVersion) -> SchemaCheck:
        key = (crd.group, crd.version, crd.kind)
        if key not in self._validators:
            converted = _to_jsonschema(crd.schema, root=True)
            self._validators[key] = SchemaCheck(converted, draft7=True)
        return self._validators[key]

    def prepare(self, crd: CrdVersion) -> None:
        """Build ``crd``'s validator and compile its CEL rules before a document needs them
        (both are cached: the verdicts do not change)."""
        self._validator(crd)
        from llmdeploy.check.cel import compile_rule

        for text in _rules(crd.schema):
            compile_rule(text)

    def validate(self, crd: CrdVersion, obj: Mapping[str, Any]) -> CrdOutcome:
        """Validate everything but the root ``metadata`` of ``obj`` against ``crd``."""
        data = copy.deepcopy(dict(obj))
        _apply_defaults(data, crd.schema, root=True)
        schema_errors = self._validator(crd).iter_errors(data)
        walker = _RuleWalker([tuple(e.absolute_path) for e in schema_errors], self._rule_cache)
        walker.walk(data, crd.schema, ())
        errors = schema_error_messages(schema_errors) + sorted(set(walker.errors))
        return CrdOutcome(tuple(errors), tuple(sorted(walker.skipped)))


def _crd_versions(path: Path) -> list[CrdVersion]:
    try:
        text = path.read_text(encoding="utf-8")
        # PyYAML's libyaml loader: ~15x faster than pure-Python ruamel on 2 MB of generated CRDs.
        docs = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CheckInputError(f"{path}: cannot read CRD file: {exc}") from exc
    out: list[CrdVersion] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc.get("spec") or {}
        legacy_schema = (spec.get("validation") or {}).get("openAPIV3Schema")  # v1beta1 CRDs
        for ver in spec.get("versions") or [{"name": spec.get("version"), "served": True}]:
            schema = (ver.get("schema") or {}).get("openAPIV3Schema") or legacy_schema
            if ver.get("served", True) and isinstance(schema, dict):
                out.append(
                    CrdVersion(
                        source=path.name,
                        group=str(spec.get("group", "")),
                        version=str(ver.get("name")),
                        kind=str((spec.get("names") or {}).get("kind", "")),
                        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                        load=functools.partial(_identity, schema),
                        origin=str(path),
                    )
                )
    return out


def _identity(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    return schema


# --- structural schema -> JSON Schema --------------------------------------------------------

_DROPPED = {"description", "default", "example", "format", "nullable", "externalDocs"}


def _to_jsonschema(
    s: Mapping[str, Any], *, root: bool = False, close: bool = True
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in s.items():
        if key in _DROPPED or key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {
                name: _to_jsonschema(sub, close=close and not (root and name == "metadata"))
                for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _to_jsonschema(value, close=close)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_to_jsonschema(sub, close=close) for sub in value]
        else:
            out[key] = value
    if out.get("exclusiveMinimum") is True:  # OpenAPI 3.0 boolean form
        out["exclusiveMinimum"] = out.pop("minimum")
    if out.get("exclusiveMaximum") is True:
        out["exclusiveMaximum"] = out.pop("maximum")
    if s.get("x-kubernetes-int-or-string") and "anyOf" not in out and "type" not in out:
        out["type"] = ["integer", "string"]
    if s.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if root or s.get("x-kubernetes-embedded-resource"):
        props = out.setdefault("properties", {})
        for name, typ in (("apiVersion", "string"), ("kind", "string"), ("metadata", "object")):
            props.setdefault(name, {"type": typ})
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    if close and s.get("type") == "object" and not preserve and "additionalProperties" not in s:
        out["additionalProperties"] = False  # the API server prunes/rejects unknown fields
    if s.get("nullable"):
        out = {"anyOf": [{"type": "null"}, out]}
    return out


def _apply_defaults(value: Any, s: Mapping[str, Any], *, root: bool = False) -> None:
    """Prune nulls of non-nullable fields, then set defaults, top-down (like the API server)."""
    if isinstance(value, dict):
        props: Mapping[str, Any] = s.get("properties", {})
        for name, sub in props.items():
            if name in value and value[name] is None and not sub.get("nullable"):
                del value[name]
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        extra = s.get("additionalProperties")
        for name, item in value.items():
            if root and name == "metadata":
                continue
            if name in props:
                _apply_defaults(item, props[name])
            elif isinstance(extra, dict):
                _apply_defaults(item, extra)
    elif isinstance(value, list) and isinstance(s.get("items"), dict):
        for item in value:
            _apply_defaults(item, s["items"])


def _rules(s: Mapping[str, Any]) -> Iterator[str]:
    """The text of every CEL rule :class:`_RuleWalker` can run under ``s``, except transition
    rules."""
    for rule in s.get("x-kubernetes-validations") or []:
        text = str(rule.get("rule", ""))
        if not _OLD_SELF.search(text):
            yield text
    subs = [*s.get("properties", {}).values(), s.get("items"), s.get("additionalProperties")]
    for sub in subs:
        if isinstance(sub, dict):
            yield from _rules(sub)


class _RuleWalker:
    def __init__(self, schema_error_paths: list[JsonPath], cache: dict[Any, Any]) -> None:
        self.cache = cache
        self.error_paths = schema_error_paths
        self.errors: list[str] = []
        self.skipped: set[str] = set()

    def walk(self, value: Any, s: Mapping[str, Any], path: JsonPath) -> None:
        rules = s.get("x-kubernetes-validations") or []
        # Where the schema already rejected the subtree, CEL would only add noise.
        if rules and not any(p[: len(path)] == path for p in self.error_paths):
            self._run_rules(value, s, path, rules)
        if isinstance(value, list):
            self._check_list_map(value, s, path)
            if isinstance(s.get("items"), dict):
                for i, item in enumerate(value):
                    self.walk(item, s["items"], (*path, i))
        elif isinstance(value, dict):
            props: Mapping[str, Any] = s.get("properties", {})
            extra = s.get("additionalProperties")
            for key, item in value.items():
                if not path and key == "metadata":
                    continue
                sub = props.get(key) or (extra if isinstance(extra, dict) else None)
                if sub is not None:
                    self.walk(item, sub, (*path, key))

    def _run_rules(
        self, value: Any, s: Mapping[str, Any], path: JsonPath, rules: list[Any]
    ) -> None:
        cel_self: Any = None
        canonical = json.dumps(value, sort_keys=True, default=str).encode()
        value_key = hashlib.blake2b(canonical, digest_size=16).digest()
        schema_path = json_path(p if isinstance(p, str) else "*" for p in path) or "<root>"
        for rule in rules:
            text = str(rule.get("rule", ""))
            if _OLD_SELF.search(text):
                continue  # transition rule: not evaluated on create
            from llmdeploy.check.cel import compile_rule, evaluate, to_cel

            program = compile_rule(text)
            if isinstance(program, str):
                self.skipped.add(f"CEL rule at {schema_path} not evaluated ({program}): {text}")
                continue
            key = (id(s), text, value_key)  # CEL is pure: same rule, node and value, same result
            if key not in self.cache:
                if cel_self is None:
                    cel_self = to_cel(value, s)
                self.cache[key] = evaluate(program, cel_self)
            outcome, detail = self.cache[key]
            where = json_path(path) + str(rule.get("fieldPath", "")) or "<root>"
            message = str(rule.get("message") or f"failed rule: {text}")
            if outcome == "fail":
                self.errors.append(f"{where}: {message}")
            elif outcome == "error":
                self.errors.append(f"{where}: {message} (rule evaluation error: {detail})")
            elif outcome == "skip":
                self.skipped.add(f"CEL rule at {schema_path} not evaluated ({detail}): {text}")

    def _check_list_map(self, value: list[Any], s: Mapping[str, Any], path: JsonPath) -> None:
        keys = s.get("x-kubernetes-list-map-keys")
        if s.get("x-kubernetes-list-type") != "map" or not keys:
            return
        seen: set[str] = set()
        for i, item in enumerate(value):
            if isinstance(item, dict):
                ident = repr(tuple(item.get(k) for k in keys))
                if ident in seen:
                    self.errors.append(f"{json_path((*path, i))}: duplicate entry for keys {keys}")
                seen.add(ident)
