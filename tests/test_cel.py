"""The CEL evaluator (``llmdeploy.check.cel``: Google's cel-expr-python) against the reference it
replaced (``tests/cel_reference.py``: cel-python with the same Kubernetes functions), rule by rule.

Every ``x-kubernetes-validations`` rule of every bundled CRD schema (issue 25) is evaluated on
values generated from the schema node it sits on (optional fields present or missing, enum
members, the string and integer literals of the rule itself and variations of them, boundary
numbers: values the rule accepts and values it rejects) and on the values the golden renders put
there. Both evaluators must give the same verdict on each value the validator evaluates: pass,
fail, or an evaluation error (the API server rejects those too); none may be skipped.

The validator runs a node's rules only when its subtree has no schema error
(``check/crd.py``'s ``_RuleWalker``), so values of the wrong structure are generated too but
left out of the comparison (cel-python answers ``has()`` on a number with false, the CEL
specification and cel-expr-python with an error).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import cel_reference as reference
from llmdeploy.check import bundled, cel
from llmdeploy.check.crd import _to_jsonschema

GOLDEN = Path(__file__).resolve().parent / "golden"
VALUES_PER_RULE = 100
# Strings that satisfy the patterns of common CRD fields (durations, percentages, quantities).
SHAPED = ("1h", "30s", "5m", "720h", "10%", "100Mi", "1Gi", "Never", "100", "0.5", "x-1")
_STRING_LITERAL = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")
_INT_LITERAL = re.compile(r"(?<![\w.])(-?\d+)(?![\w.])")


def rule_sites(
    s: Mapping[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any], str]]:
    """(schema path, schema node, rule) for every rule under ``s`` (transition rules excluded:
    they do not run on create)."""
    for rule in s.get("x-kubernetes-validations") or []:
        text = str(rule.get("rule", ""))
        if not re.search(r"\boldSelf\b", text):
            yield path, s, text
    for name, sub in (s.get("properties") or {}).items():
        yield from rule_sites(sub, (*path, name))
    for key in ("items", "additionalProperties"):
        if isinstance(s.get(key), dict):
            yield from rule_sites(s[key], (*path, "*"))


def all_sites() -> list[tuple[str, tuple[str, ...], Mapping[str, Any], str]]:
    out = []
    for entry in bundled.manifest()["kinds"]:
        versions = bundled._kind_file(entry["file"])["versions"]
        for version, schema in sorted(versions.items()):
            for path, node, rule in rule_sites(schema):
                out.append((f"{entry['kind']}/{version}", path, node, rule))
    return out


SITES = all_sites()


def golden_values() -> dict[tuple[str, tuple[str, ...]], list[Any]]:
    """What the golden renders put at each schema path, by kind (the values a render checks)."""
    found: dict[tuple[str, tuple[str, ...]], list[Any]] = {}

    def walk(kind: str, value: Any, path: tuple[str, ...]) -> None:
        found.setdefault((kind, path), []).append(value)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(kind, item, (*path, key))
                walk(kind, item, (*path, "*"))
        elif isinstance(value, list):
            for item in value:
                walk(kind, item, (*path, "*"))

    for path in sorted(GOLDEN.glob("**/expected/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and "kind" in doc:
                version = str(doc.get("apiVersion", "")).rpartition("/")[2]
                walk(f"{doc['kind']}/{version}", doc, ())
    return found


GOLDEN_VALUES = golden_values()


class Generator:
    """Values for one schema node, valid and invalid, from a seeded random source."""

    def __init__(self, rule: str, seed: int) -> None:
        self.rng = random.Random(seed)
        literals = [a or b for a, b in _STRING_LITERAL.findall(rule)]
        self.strings = [
            *literals,
            *(f"{x}/extra" for x in literals),
            *(f"{x}@v1" for x in literals),
        ]
        self.strings += ["", "a", "karpenter.sh/x", "kubernetes.io/os", "al2023@latest", "1", "-3"]
        self.ints = [int(x) for x in _INT_LITERAL.findall(rule)] + [0, 1, -1, 2, 3, 100]

    def string(self, s: Mapping[str, Any] | None = None) -> str:
        pattern = (s or {}).get("pattern")
        if pattern:
            fitting = [x for x in (*self.strings, *SHAPED) if re.search(pattern, x)]
            if fitting and self.rng.random() < 0.9:
                return self.rng.choice(fitting)
        return self.rng.choice(self.strings)

    def integer(self, s: Mapping[str, Any]) -> int:
        bounds = [int(s[k]) for k in ("minimum", "maximum") if isinstance(s.get(k), int | float)]
        near = [b + d for b in bounds for d in (-1, 0, 1)]
        return int(self.rng.choice([*self.ints, *near, *near]))

    def scalar(self) -> Any:
        kind = self.rng.randrange(4)
        if kind == 0:
            return self.string()
        if kind == 1:
            return self.rng.choice(self.ints)
        return [None, True, 1.5][kind - 2]

    def value(self, s: Mapping[str, Any], depth: int = 0) -> Any:
        if self.rng.random() < 0.03:  # a value of the wrong type
            return self.scalar()
        if "enum" in s and self.rng.random() < 0.8:
            return self.rng.choice(s["enum"])
        kind = s.get("type")
        if s.get("x-kubernetes-int-or-string"):
            kind = self.rng.choice(["integer", "string"])
        if kind == "object" or "properties" in s:
            return self.mapping(s, depth)
        if kind == "array":
            items = s.get("items") if isinstance(s.get("items"), dict) else {}
            count = self.rng.choice([0, 1, 1, 2, 3]) if depth < 4 else 0
            return [self.value(items, depth + 1) for _ in range(count)]
        if kind == "string":
            return self.string(s)
        if kind == "integer":
            return self.integer(s)
        if kind == "number":
            return self.rng.choice([self.integer(s), 0.5, 2.5])
        if kind == "boolean":
            return self.rng.random() < 0.5
        return self.scalar()

    def mapping(self, s: Mapping[str, Any], depth: int) -> dict[str, Any]:
        required = set(s.get("required") or ())
        out: dict[str, Any] = {}
        for name, sub in (s.get("properties") or {}).items():
            keep = 0.9 if name in required else 0.6
            if depth < 5 and self.rng.random() < keep:
                out[name] = self.value(sub, depth + 1)
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) and depth < 5:
            for _ in range(self.rng.choice([0, 1, 2, 3])):
                out[self.string() or "k"] = self.value(extra, depth + 1)
        return out


def evaluated_values(
    kind: str, path: tuple[str, ...], node: Mapping[str, Any], rule: str
) -> list[Any]:
    """The generated and golden values at a rule's node that pass its schema (the values the
    validator evaluates the rule on)."""
    seed = int.from_bytes(json.dumps([kind, path, rule]).encode()[:8].ljust(8, b"\0"), "big")
    gen = Generator(rule, seed)
    values = [gen.value(node) for _ in range(VALUES_PER_RULE)]
    values += GOLDEN_VALUES.get((kind, path), [])
    schema = jsonschema.Draft7Validator(_to_jsonschema(node))
    return [v for v in values if schema.is_valid(v)]


def cel_python_logic_gap(rule: str, node: Mapping[str, Any], value: Any) -> bool:
    """cel-python's one known gap on these rules: ``&&``/``||`` with an error on both sides, and
    so ``all()``/``exists()`` (folds of them) over two erroring elements, have no overload
    there, while the CEL specification (cel-spec, doc/langdef.md, "Logical operators" and
    "Macros") makes the result an error, as cel-expr-python does (test below)."""
    if not re.search(r"&&|\|\||\.all\(|\.exists\(", rule):
        return False
    detail = reference.evaluate(reference.compile_rule(rule), reference.to_cel(value, node))[1]
    return detail == "no such overload" or bool(
        re.search(r"no matching overload for _(&&|\|\|)_ applied to .*CELEvalError", detail)
    )


def verdicts(rule: str, node: Mapping[str, Any], value: Any) -> tuple[str, str]:
    """(reference outcome, new outcome) for one value: pass, fail, error or skip."""
    ref_program = reference.compile_rule(rule)
    new_program = cel.compile_rule(rule)
    ref = "skip" if isinstance(ref_program, str) else None
    new = "skip" if isinstance(new_program, str) else None
    if ref is None:
        ref = reference.evaluate(ref_program, reference.to_cel(value, node))[0]
    if new is None:
        new = cel.evaluate(new_program, cel.to_cel(value, node))[0]
    return ref, new


@pytest.mark.parametrize(
    ("kind", "path", "node", "rule"),
    SITES,
    ids=[f"{k}:{'.'.join(p) or '<root>'}:{i}" for i, (k, p, _, _) in enumerate(SITES)],
)
def test_both_evaluators_agree_on_every_value(
    kind: str, path: tuple[str, ...], node: Mapping[str, Any], rule: str
) -> None:
    values = evaluated_values(kind, path, node, rule)
    assert len(values) >= 10, f"{rule!r}: only {len(values)} values pass the schema"
    outcomes: dict[str, int] = {}
    for value in values:
        ref, new = verdicts(rule, node, value)
        if (ref, new) == ("skip", "error") and cel_python_logic_gap(rule, node, value):
            continue
        assert ref == new, f"{rule!r} on {value!r}: cel-python {ref}, cel-expr-python {new}"
        outcomes[new] = outcomes.get(new, 0) + 1
    assert "skip" not in outcomes, f"{rule!r} evaluated by neither: {outcomes}"


def test_the_generated_values_reach_both_verdicts() -> None:
    """A differential test whose values all passed would prove little: across the bundled
    rules, most see both a passing and a failing (or erroring) value, and none is skipped."""
    one_sided = []
    for kind, path, node, rule in SITES:
        values = evaluated_values(kind, path, node, rule)
        seen = {cel.evaluate(cel.compile_rule(rule), cel.to_cel(v, node))[0] for v in values}
        if not ("pass" in seen and seen & {"fail", "error"}):
            one_sided.append(rule)
    assert len(SITES) >= 60
    assert len(one_sided) <= 0.25 * len(SITES), one_sided


def test_kubernetes_regex_functions() -> None:
    """``find``/``findAll`` as Kubernetes documents them (kubernetes/kubernetes,
    staging/src/k8s.io/apiserver/pkg/cel/library/regex.go, the examples of ``Regex()``)."""
    cases = {
        "'abc 123'.find('[0-9]+') == '123'": "pass",
        "'abc 123'.find('xyz') == ''": "pass",
        "'123 abc 456'.findAll('[0-9]+') == ['123', '456']": "pass",
        "'123 abc 456'.findAll('[0-9]+', 1) == ['123']": "pass",
        "'123 abc 456'.findAll('xyz') == []": "pass",
        "'a/b/c'.split('/', 2) == ['a', 'b/c']": "pass",  # cel-go ext.Strings, version 2
        "'ABC'.lowerAscii() == 'abc' && ['a', 'b'].join('-') == 'a-b'": "pass",
        "int(self) > 0": "error",  # self is "x": the API server rejects it as well
    }
    for rule, expected in cases.items():
        program = cel.compile_rule(rule)
        assert not isinstance(program, str), program
        assert cel.evaluate(program, "x")[0] == expected, rule


def test_an_error_on_both_sides_of_a_logical_operator_is_an_error() -> None:
    """cel-spec doc/langdef.md, "Logical operators": ``&&`` and ``||`` are commutative over
    errors; when neither side decides the result, the result is an error. The one place where
    cel-python, the reference, has a gap (it finds no overload)."""
    rule = "self.a.size() == 1 && int(self.b) >= 0"
    assert cel.evaluate(cel.compile_rule(rule), {})[0] == "error"
    assert cel.evaluate(cel.compile_rule(rule), {"a": [1], "b": "7"})[0] == "pass"
    assert cel.evaluate(cel.compile_rule("self.a.size() == 1 && false"), {})[0] == "fail"
    ref = reference.evaluate(reference.compile_rule(rule), reference.to_cel({}, {}))
    assert ref[0] == "skip" and "_&&_" in ref[1]
    # all() is a fold of &&: two erroring elements are an error, a false one decides
    rule = "self.all(x, x.v.size() != 0)"
    assert cel.evaluate(cel.compile_rule(rule), [{}, {}])[0] == "error"
    assert cel.evaluate(cel.compile_rule(rule), [{}, {"v": []}])[0] == "fail"
    ref = reference.evaluate(reference.compile_rule(rule), reference.to_cel([{}, {}], {}))
    assert ref == ("skip", "no such overload")


def test_a_function_outside_the_libraries_is_skipped_and_named() -> None:
    assert cel.compile_rule("isQuantity(self.size)") == "uses isQuantity, not available here"
    assert cel.compile_rule("self.x__dash__y > 1") == "uses an escaped field name"
    assert cel.compile_rule("self.a >").startswith("does not compile: ")
