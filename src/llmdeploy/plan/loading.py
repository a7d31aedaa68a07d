"""How a model pod gets its weights (``model.loading``), for the servers that read a Hugging Face
checkpoint themselves (vLLM, TensorRT-LLM's PyTorch path): the Hub token file, the model cache
volume and the S3 init container (docs/production.md §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.plan.types import KV, Container, EnvVar, Mount, Resources, Volume
from llmdeploy.spec.sections import SecretKeyRef, Spec

MODEL_DIR = "/models"
# Pinned, never `latest`: the AWS CLI image of the S3 init containers.
AWS_CLI_IMAGE = "amazon/aws-cli:2.22.0"
# The Hugging Face token is mounted as a file, never put in the environment: huggingface_hub
# reads the file named by HF_TOKEN_PATH when HF_TOKEN is unset (huggingface_hub constants.py).
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
# The model cache holds what is downloaded, sized from the checkpoint's files as stored (the
# 16-bit checkpoint when the server quantizes at load), not from the weights in GPU memory:
# + 10% and 10 GiB for the tokenizer, config and the Hub's metadata. Meta's repos also carry an
# `original/` copy of the weights (consolidated .pth); vLLM's own download skips it
# (LoadConfig.ignore_patterns defaults to ["original/**/*"], vllm/config/load.py@v0.19.0) and
# the S3 sync excludes it, so it never reaches the cache.
CACHE_HEADROOM = 1.10
CACHE_EXTRA_GIB = 10
EXCLUDED_FROM_SYNC = ("original/*",)


def cache_gib(download_gib: float) -> int:
    return math.ceil(download_gib * CACHE_HEADROOM + CACHE_EXTRA_GIB)


@dataclass(frozen=True)
class Loading:
    env: tuple[EnvVar, ...]
    mounts: tuple[Mount, ...]
    volumes: tuple[Volume, ...]
    init_containers: tuple[Container, ...]
    disk_gib: int  # the disk-backed model cache (0 for a volume), part of ephemeral-storage


def hf_token_file(secret: SecretKeyRef) -> tuple[EnvVar, Mount, Volume]:
    """The token Secret as a read-only file, and HF_TOKEN_PATH naming it."""
    return (
        EnvVar("HF_TOKEN_PATH", f"{HF_TOKEN_DIR}/token"),
        Mount("hf-token", HF_TOKEN_DIR, read_only=True),
        Volume("hf-token", "secret", secret=secret.name, items=(KV(secret.key, "token"),)),
    )


def model_loading(spec: Spec, cache: int, run_as_user: int) -> Loading:
    """huggingface: the server downloads (token as a file); s3: an init container syncs
    ``s3Uri`` into /models/model; pvc: the volume's root holds the model files, read-only and
    offline. ``cache`` GiB is the cache ``emptyDir`` (not for pvc)."""
    loading = spec.model.loading
    env: list[EnvVar] = []
    mounts: list[Mount] = []
    volumes: list[Volume] = []
    if loading.mode == "huggingface":
        if loading.hf_token_secret is not None:
            var, mount, volume = hf_token_file(loading.hf_token_secret)
            env.append(var)
            mounts.append(mount)
            volumes.append(volume)
    else:
        env.append(EnvVar("HF_HUB_OFFLINE", "1"))
    if loading.mode == "pvc":
        assert loading.pvc_name is not None
        mounts.append(Mount("models", MODEL_DIR, read_only=True))
        volumes.append(Volume("models", "pvc", claim=loading.pvc_name, read_only=True))
    else:
        mounts.append(Mount("models", MODEL_DIR))
        volumes.append(Volume("models", "emptyDir", size_limit=f"{cache}Gi"))
    init: tuple[Container, ...] = ()
    if loading.mode == "s3":
        assert loading.s3_uri is not None
        init = (
            Container(
                name="fetch-model",
                image=AWS_CLI_IMAGE,
                command=("aws",),
                args=(
                    "s3",
                    "sync",
                    "--only-show-errors",
                    "--no-progress",
                    *(word for pattern in EXCLUDED_FROM_SYNC for word in ("--exclude", pattern)),
                    loading.s3_uri,
                    f"{MODEL_DIR}/model",
                ),
                env=(EnvVar("HOME", "/tmp"),),
                ports=(),
                mounts=(Mount("models", MODEL_DIR), Mount("tmp", "/tmp")),
                resources=Resources(cpu="2", memory="4Gi", ephemeral_storage=None, gpus=0),
                run_as_user=run_as_user,
            ),
        )
    return Loading(
        env=tuple(env),
        mounts=tuple(mounts),
        volumes=tuple(volumes),
        init_containers=init,
        disk_gib=0 if loading.mode == "pvc" else cache,
    )
