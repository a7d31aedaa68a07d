"""The preset catalog (``llmdeploy.presets``): what every preset promises, and the rule that
says it fits with margin.

Every preset renders and validates byte for byte against its golden directory
(tests/golden/presets/, test_golden.py); here: the catalog's breadth, each preset's rationale
and checkpoint, the margin rule on every preset and on mutations that break each of its
clauses, and the table the CLI and the README print.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from conftest import load_script
from llmdeploy import pipeline, presets
from llmdeploy.catalog import models
from llmdeploy.cli import preset_report
from llmdeploy.spec import load

REPO = Path(__file__).resolve().parents[1]
NAMES = pipeline.preset_names()
SHA = re.compile(r"\b[0-9a-f]{40}\b")


def test_the_catalog_is_broad() -> None:
    catalog = presets.catalog()
    assert len(catalog) >= 15
    families = {p.instance.family for p in catalog}
    assert len(families) >= 6, families
    assert {p.spec.engine.type for p in catalog} == {"vllm", "trtllm"}
    # several replicas per node where the GPUs allow it: at least one preset per kind of node
    assert any(p.replicas_per_node >= 4 for p in catalog)
    assert any(p.gpus_per_replica == 1 and p.replicas_per_node == 8 for p in catalog)
    # mixture-of-experts with data and expert parallelism, and a multimodal model
    moe = [p for p in catalog if p.spec.serving.expert_parallel and p.sizing.data_parallel > 1]
    assert {p.parallelism for p in moe} == {"TP4 DP2 EP", "TP1 DP8 EP"}
    assert all(
        p.kv_tokens_per_replica == p.sizing.kv_cache_tokens * p.sizing.data_parallel for p in moe
    )
    assert any(p.sizing.request.architecture.multimodal for p in catalog)


@pytest.mark.parametrize("name", NAMES)
def test_every_preset_fits_with_margin(name: str) -> None:
    found = presets.summary(name)
    assert found.margin_problems == (), found.margin_problems
    assert found.sizing.fits


@pytest.mark.parametrize("name", NAMES)
def test_every_preset_starts_with_a_one_line_rationale(name: str) -> None:
    path = pipeline.preset_path(name)
    assert path is not None
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and len(lines[0]) <= 100, lines[0]
    assert lines[1] == "#"
    found = presets.summary(name).rationale
    assert found.summary == lines[0][2:]
    assert found.details and all(line for line in found.details)


@pytest.mark.parametrize("name", NAMES)
def test_every_preset_names_its_checkpoint_and_revision(name: str) -> None:
    """The checkpoint is one the catalog knows (so a pre-quantized repo is sized from its own
    quantization_config); the revision is pinned in the spec, named in the comment, or the
    comment says that it is not pinned."""
    found = presets.summary(name)
    spec = found.spec
    assert models.known_repo(spec.model.id) is not None, spec.model.id
    details = "\n".join(found.rationale.details)
    assert spec.model.id in details
    revision = spec.model.revision
    if revision is not None:
        assert SHA.fullmatch(revision), revision
        assert revision in details
    else:
        assert SHA.search(details) or "not pinned" in details, details
    if spec.model.loading.mode == "s3" and (sha := SHA.search(details)):
        assert spec.model.loading.s3_uri is not None
        assert sha[0] in spec.model.loading.s3_uri or "stage" in details


def test_a_preset_needs_its_rationale_comment() -> None:
    good = "# Why.\n#\n# Details.\napiVersion: x\n"
    assert presets.rationale(good, "t") == presets.Rationale("Why.", ("Details.",))
    bad_heads = ("apiVersion: x\n", "# Why.\napiVersion: x\n", "#\n#\n# D.\n", "# Why.\n# More.\n")
    for bad in bad_heads:
        with pytest.raises(ValueError, match="one-line rationale"):
            presets.rationale(bad, "t")


# --- the margin rule, one clause at a time --------------------------------------------------------


def _summary_of(name: str, edit: str, replace: str) -> presets.PresetSummary:
    path = pipeline.preset_path(name)
    assert path is not None
    text = path.read_text(encoding="utf-8")
    assert edit in text
    loaded = load.load_spec_text(text.replace(edit, replace), f"{name} (variant)", path)
    sized = pipeline.size_loaded(loaded, suggest=False)
    base = presets.summary(name)
    return dataclasses.replace(
        base,
        spec=loaded.spec,
        sizing=sized.sizing,
        margin_problems=presets.margin_problems(loaded.spec, sized.sizing),
    )


def test_margin_needs_two_full_length_requests_per_replica() -> None:
    # gpt-oss-120b at its full 131k context: it starts, but holds one such request
    variant = _summary_of("gpt-oss-120b-vllm-p5", "maxModelLen: 32768", "maxModelLen: 131072")
    assert variant.sizing.fits
    assert 1 <= variant.sizing.max_concurrency < presets.FULL_LENGTH_REQUESTS
    assert variant.margin_problems == (
        f"one replica's KV cache holds {variant.sizing.max_concurrency} requests of 131072 "
        "tokens, fewer than 2",
    )


def test_margin_needs_a_spare_replica_at_the_slos_peak() -> None:
    base = presets.summary("gpt-oss-120b-vllm-p5")
    needed = base.sizing.replicas_for_slo
    assert needed is not None and needed > 1
    variant = _summary_of("gpt-oss-120b-vllm-p5", "maxReplicas: 16", f"maxReplicas: {needed}")
    assert variant.margin_problems == (
        f"the SLO's peak needs {needed} replicas and at most {needed} run: fewer than 1 to spare",
    )
    spare = _summary_of("gpt-oss-120b-vllm-p5", "maxReplicas: 16", f"maxReplicas: {needed + 1}")
    assert spare.margin_problems == ()


def test_margin_keeps_vllms_budget_below_its_ceiling() -> None:
    base = presets.summary("gpt-oss-120b-vllm-p5").sizing
    ceiling = base.max_gpu_memory_utilization
    assert ceiling is not None
    variant = _summary_of(
        "gpt-oss-120b-vllm-p5", "gpuMemoryUtilization: 0.95", f"gpuMemoryUtilization: {ceiling}"
    )
    assert variant.sizing.fits  # at the ceiling it still starts...
    assert variant.margin_problems == (  # ...with nothing to spare
        f"gpu_memory_utilization {ceiling} is within 0.01 of its ceiling {ceiling} (CUDA "
        "context and graphs live outside the budget)",
    )


def test_margin_keeps_trtllms_kv_fraction_at_most_0_9() -> None:
    name = "llama3-8b-trtllm-g6e"
    variant = _summary_of(name, "kvCacheFreeGpuMemFraction: 0.9", "kvCacheFreeGpuMemFraction: 0.95")
    assert variant.sizing.fits
    assert variant.margin_problems == ("the KV cache takes 0.95 of the free memory, more than 0.9",)


def test_margin_reports_a_configuration_that_does_not_fit() -> None:
    variant = _summary_of("llama3-8b-vllm-g5", "instanceFamily: g5", "instanceType: g4dn.xlarge")
    assert not variant.sizing.fits
    assert variant.margin_problems[0].startswith("does not fit: ")


# --- what the CLI and the README print ------------------------------------------------------------


def test_the_table_has_a_row_per_preset_and_the_models_throughput() -> None:
    catalog = presets.catalog()
    text = preset_report.table(catalog)
    header, *rows = text.splitlines()
    assert header.split()[:3] == ["preset", "model", "engine"]
    assert [row.split()[0] for row in rows] == NAMES
    for row, p in zip(rows, catalog, strict=True):
        cells = row.split()
        # the performance model's figure at the SLO load: every preset's layout is modelled
        # (DP and EP in a pod, PP over nodes, hybrids: tests/test_perf_layouts.py)
        perf = pipeline.size_loaded(load.load_spec_file(p.path), performance=True).performance
        assert perf is not None and perf.estimate is not None, p.name
        assert cells[-1] == f"{perf.estimate.output_tokens_per_s:.0f}"
        assert cells[-2] == str(p.kv_tokens_per_replica)
        price = p.instance.price_usd_hr
        assert cells[-3] == ("—" if price is None else f"{price:.2f}")


def test_every_preset_shows_its_engine_release_date_with_a_source() -> None:
    """Issue 23: each preset's engine release is dated: vLLM 0.24.0 by llm-d/llm-d-benchmark#1575
    and aws/deep-learning-containers#6329 (2026-07-01), TensorRT-LLM 1.2.1 by NGC's release
    image (2026-04-20, engines/trtllm/releases.py RELEASE-IMAGE)."""
    catalog = presets.catalog()
    header, *rows = preset_report.table(catalog).splitlines()
    assert header.split()[:4] == ["preset", "model", "engine", "released"]
    expected = {"vllm 0.24.0": "2026-07-01", "trtllm 1.2.1": "2026-04-20"}
    for row, p in zip(rows, catalog, strict=True):
        assert p.engine in expected, p.name
        assert row.split()[4] == expected[p.engine], p.name
        release = p.engine_release
        assert release is not None and release.source
        assert f"released    {release.date} (source: {release.source})" in preset_report.show(p)


def test_every_vllm_preset_pins_the_default_release() -> None:
    """The presets move with the default (the newest release whose flags, memory and metrics the
    repository verifies: 0.24.0, measured on an H200 in tests/data/calibration)."""
    from llmdeploy.engines.vllm.spec import DEFAULT_VLLM_VERSION

    vllm = [p for p in presets.catalog() if p.sizing.engine == "vllm"]
    assert vllm and {p.sizing.engine_version for p in vllm} == {DEFAULT_VLLM_VERSION}


def test_prices_are_dated_and_a_missing_price_is_said_so() -> None:
    catalog = presets.catalog()
    assert preset_report.price_dates(catalog) == ["2026-01-21"]
    unpriced = [p for p in catalog if p.instance.price_usd_hr is None]
    assert unpriced, "the p5e preset has no on-demand price"
    assert all(p.instance.price_as_of is None for p in unpriced)
    legend = preset_report.notes(catalog)[0]
    assert "2026-01-21" in legend and "p5e.48xlarge" in legend


def test_show_prints_the_rationale_checkpoint_and_margin() -> None:
    p = presets.summary("gpt-oss-120b-vllm-p5")
    text = preset_report.show(p)
    lines = text.splitlines()
    assert lines[0] == f"gpt-oss-120b-vllm-p5: {p.rationale.summary}"
    assert "\n".join(p.rationale.details) in text
    assert "revision    b5c939de8f754692c1647ca79fbf85e8c1e70f8a" in lines
    assert "margin      fits with margin" in lines
    assert "$55.04/h per node, $6.88/h per replica" in text
    unpinned = preset_report.show(presets.summary("qwen3-32b-vllm-fp8-g6e"))
    assert "not pinned in the spec (model.revision unset)" in unpinned


def test_readme_preset_table_is_generated_from_the_catalog() -> None:
    gen = load_script("scripts/gen_docs.py")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert gen.with_presets(readme) == readme, "README is stale: run python scripts/gen_docs.py"
    section = readme[readme.index(gen.PRESETS_BEGIN) : readme.index(gen.PRESETS_END)]
    for name in NAMES:
        assert f"| `{name}` |" in section and f"- `{name}`: " in section
    stale = readme.replace("| `gpt-oss-120b-vllm-p5` |", "| `gpt-oss-120b` |")
    assert gen.with_presets(stale) == readme
