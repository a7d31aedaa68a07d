"""Sizing a replica split into pipeline stages (sizing/pipeline.py, engines/vllm/pipeline.py).

vLLM's rules, modelled here from its source and checked on the sizing:

- ``get_pp_indices`` (vllm/distributed/utils.py): the layer split, two forms by release;
- the first stage holds the input embedding, the last the final norm, ``lm_head`` and the
  sampler; every stage but the first receives ``hidden_states`` and ``residual``;
- every worker gets the fewest KV blocks any worker has (``get_kv_cache_configs``), so the
  replica's capacity is its smallest stage's.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from llmdeploy.catalog import models
from llmdeploy.cli.commands import app
from llmdeploy.engines import registry
from llmdeploy.engines.vllm.pipeline import stage_layers
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.calculator import compute
from llmdeploy.sizing.pipeline import stage_architecture, stages, with_layout
from llmdeploy.sizing.requests import request_from_options
from llmdeploy.sizing.suggest import apply_suggestion, size
from llmdeploy.sizing.types import PipelineStage

GIB = 2**30


def req405(nodes: int = 1, **over: object) -> object:
    req = request_from_options(
        "llama-3.1-405b", instance="p5.48xlarge", tp=8, max_model_len=8192, **over
    )
    return with_layout(req, nodes)


# --- the layer split ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "layers", "pp", "split"),
    [
        # from 0.8.0: the remainder to the stages before the last, second-to-last first
        ("0.19.0", 126, 2, (63, 63)),  # Llama 3.1 405B
        ("0.19.0", 61, 2, (31, 30)),  # DeepSeek-V3: the first stage takes the extra layer
        ("0.19.0", 80, 3, (27, 27, 26)),
        ("0.19.0", 126, 4, (31, 32, 32, 31)),  # 2 left over: middle stages only
        ("0.19.0", 62, 4, (15, 16, 16, 15)),
        ("0.19.0", 63, 4, (16, 16, 16, 15)),  # 3 left over: every stage but the last
        ("0.8.0", 80, 3, (27, 27, 26)),
        # up to 0.7.3: the last stage takes the remainder
        ("0.7.3", 80, 3, (26, 26, 28)),
        ("0.6.2", 61, 2, (30, 31)),
    ],
)
def test_split_is_get_pp_indices(
    version: str, layers: int, pp: int, split: tuple[int, ...]
) -> None:
    assert stage_layers(version, layers, pp) == split


@settings(max_examples=50, deadline=None)
@given(layers=st.integers(1, 200), pp=st.integers(1, 16))
def test_split_covers_every_layer_once_and_spares_the_last_stage(layers: int, pp: int) -> None:
    split = stage_layers("0.19.0", layers, pp)
    assert len(split) == pp and sum(split) == layers
    assert max(split) - min(split) <= 1
    assert split[-1] == layers // pp  # the last stage never takes a leftover layer
    old = stage_layers("0.7.3", layers, pp)
    assert sum(old) == layers and old[:-1] == (layers // pp,) * (pp - 1)


def test_stage_architecture_keeps_leading_dense_layers_where_they_fall() -> None:
    arch = models.load_architecture("deepseek-v3")  # 61 layers, the first 3 dense
    first = stage_architecture(arch, PipelineStage(0, 2, 0, 31))
    last = stage_architecture(arch, PipelineStage(1, 2, 31, 30))
    assert (first.num_layers, first.dense_layers, first.moe_layers) == (31, 3, 28)
    assert (last.num_layers, last.dense_layers, last.moe_layers) == (30, 0, 30)


# --- per-stage memory ---------------------------------------------------------------------------


def test_405b_on_two_p5_stage_by_stage() -> None:
    """shared/reference/multinode.md §5: 126 layers -> 63 + 63, about 47.3 GiB of weights per
    GPU, 32,256 KV bytes per token per GPU (63 layers x 2 x 1 KV head x 128 x 2 B)."""
    s = compute(req405(nodes=2))
    assert s.fits and (s.tp, s.pp, s.nodes) == (8, 2, 2)
    first, last = s.stages
    assert (first.first_layer, first.layers, last.first_layer, last.layers) == (0, 63, 63, 63)
    assert first.holds == ("embedding",) and last.holds == ("lm_head",)
    assert first.weights_gib == pytest.approx(47.3, abs=0.1)
    assert first.kv_bytes_per_token_per_gpu == last.kv_bytes_per_token_per_gpu == 32_256
    # the sampler and the receive buffers make the last stage the smaller KV pool
    assert last.activation_gib > first.activation_gib
    assert s.binding_stage == 1 and s.num_gpu_blocks == last.num_gpu_blocks
    assert s.kv_cache_tokens == last.num_gpu_blocks * s.block_size


def test_stage_weights_add_up_to_the_model() -> None:
    """Each layer is on exactly one stage; the embedding and lm_head once each (no tied
    embeddings in Llama 3.1); only the rotary cache is built on every stage."""
    whole = compute(req405())
    staged = compute(req405(nodes=3))
    per_gpu = sum(x.weights_gib for x in staged.stages)
    rope = dict(whole.weights_breakdown_gib)["rope_cache"]
    assert per_gpu == pytest.approx(whole.weights_gib_per_gpu + 2 * rope, abs=0.01)


def test_tied_embeddings_sit_on_the_first_and_the_last_stage() -> None:
    arch = models.load_architecture("llama-3.2-1b")
    assert arch.tie_word_embeddings
    parts = {
        (first, last): mem.weight_breakdown(arch, None, 1, first_stage=first, last_stage=last)
        for first, last in ((True, False), (False, False), (False, True))
    }
    assert "embedding" in parts[True, False] and "embedding" in parts[False, True]
    assert "embedding" not in parts[False, False]
    assert all("lm_head" not in p for p in parts.values())


def test_only_the_last_stage_samples_and_only_later_stages_receive() -> None:
    arch = models.load_architecture("llama-3.1-8b")
    kw = {"sampler_bytes": 14.9, "moe_workspace": True}
    act = {
        (f, last): mem.activation_bytes(
            arch, None, 1, 8192, 1024, first_stage=f, last_stage=last, **kw
        )
        for f, last in ((True, True), (True, False), (False, False), (False, True))
    }
    received = 2 * 8192 * arch.hidden_size * 2
    assert act[False, False] - act[True, False] == received
    assert act[True, True] > act[True, False]  # the sampler's logits
    assert act[False, True] == act[True, True] + received


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(2, 6))
def test_more_nodes_never_mean_less_kv_per_replica(nodes: int) -> None:
    fewer, more = compute(req405(nodes=nodes)), compute(req405(nodes=nodes + 1))
    assert more.kv_cache_tokens >= fewer.kv_cache_tokens
    assert more.weights_gib_per_gpu <= fewer.weights_gib_per_gpu


def test_layout_rules() -> None:
    base = request_from_options("llama-3.1-405b", instance="p5.48xlarge", tp=4)
    across = compute(with_layout(base, 2))
    assert any("tensor parallel must be the 8 GPUs" in r for r in across.reasons)
    one_node = compute(dataclasses.replace(base, tp=8, pp=2))
    assert any("= 16 GPUs exceeds the 8 GPU(s)" in r for r in one_node.reasons)
    assert stages(dataclasses.replace(base, engine=registry.get("trtllm"), pp=2)) is None
    refused = compute(dataclasses.replace(base, engine=registry.get("trtllm"), pp=2))
    assert not refused.fits and "without pipeline parallelism" in refused.reasons[0]
    tiny = request_from_options("llama-3.2-1b", instance="g6e.48xlarge", tp=1)
    too_many = compute(dataclasses.replace(tiny, pp=32))  # 16 layers: empty stages
    assert not too_many.fits and too_many.reasons[0].startswith("pipeline parallel 32 exceeds")


def test_pipeline_inside_one_node() -> None:
    """TP x PP inside one PCIe node (L40S): one pod of 8 GPUs, no group."""
    req = request_from_options("llama-3-70b", instance="g6e.48xlarge", tp=4, max_model_len=8192)
    s = compute(with_layout(req, 1, 2))
    assert s.fits and (s.pp, s.nodes, len(s.stages)) == (2, 1, 2)
    assert s.request.gpus_per_pod == 8


# --- suggestions and the report -----------------------------------------------------------------


def test_suggestions_put_one_node_first_and_two_nodes_last() -> None:
    s = size(req405())
    assert not s.fits
    changes = [x.change for x in s.suggestions]
    assert changes[0].startswith("quantization: fp8")
    assert "instanceType: p5en.48xlarge" in changes
    assert changes[-1] == "nodesPerReplica: 2 (2 x p5.48xlarge, TP8 x PP2)"
    two = s.suggestions[-1]
    assert two.fits and two.nodes == 2 and two.price_usd_hr == pytest.approx(2 * 55.04)
    assert dict(two.changes) == {"hardware.nodesPerReplica": "2"}


def test_a_replica_on_two_nodes_is_offered_one_node_alternatives() -> None:
    s = size(req405(nodes=2))
    assert s.fits
    changes = [x.change for x in s.suggestions]
    assert changes and all(c.startswith("nodesPerReplica: 1") for c in changes)
    assert "nodesPerReplica: 1, quantization: fp8" in changes
    assert all(x.fits and x.nodes == 1 for x in s.suggestions)


@pytest.mark.parametrize("nodes", [1, 2])
def test_every_suggestion_resizes_to_what_it_says(nodes: int) -> None:
    req = req405(nodes=nodes)
    result = size(req)
    assert result.suggestions
    for suggestion in result.suggestions:
        resized = compute(apply_suggestion(req, suggestion))
        assert resized.fits, suggestion.change
        assert resized.nodes == suggestion.nodes, suggestion.change
        assert resized.kv_cache_gib_per_gpu == pytest.approx(suggestion.kv_cache_gib_per_gpu)


def test_size_explains_the_split() -> None:
    runner = CliRunner()
    args = ["size", "--model", "llama-3.1-405b", "--instance", "p5.48xlarge", "--tp", "8"]
    args += ["--nodes", "2", "--max-model-len", "8192"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["tp"], data["pp"], data["nodes"], data["binding_stage"]) == (8, 2, 2, 1)
    assert [(x["first_layer"], x["layers"]) for x in data["stages"]] == [(0, 63), (63, 63)]
    table = runner.invoke(app, args, env={"COLUMNS": "120"})
    assert table.exit_code == 0
    words = " ".join(table.output.split())  # the title wraps at the table's width
    assert "on 2 x p5.48xlarge: TP 8 x PP 2," in words
    assert "pipeline stages" in table.output and "63-125 (63)" in table.output
