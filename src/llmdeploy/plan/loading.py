"""How a model pod gets its weights (``model.loading``), for the servers that read a Hugging Face
checkpoint themselves (vLLM, TensorRT-LLM's PyTorch path): the Hub token file, the model cache
volume and the S3 init container (docs/production.md §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.plan.pod import fetch_deadline_seconds
from llmdeploy.plan.types import KV, Container, EnvVar, Mount, Resources, Volume
from llmdeploy.spec.sections import SecretKeyRef, Spec

MODEL_DIR = "/models"
# Pinned, never `latest`: the images of the S3 init containers. s5cmd's is alpine (busybox
# `timeout`; its Dockerfile at v2.3.0), the AWS CLI's Amazon Linux (coreutils).
AWS_CLI_IMAGE = "amazon/aws-cli:2.22.0"
S5CMD_IMAGE = "peakcom/s5cmd:v2.3.0"
S5CMD_WORKERS = 32  # files in parallel (s5cmd's global pool; default 256)
S5CMD_PARTS = 16  # parts in parallel per file (default 5): a checkpoint is a few large shards
AWS_CLI_CONCURRENCY = 64
AWS_CLI_CHUNK = "64MB"
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


# Seconds between two attempts of the sync inside its init container.
RETRY_PAUSE_SECONDS = 10


def retrying(deadline: int, tool: str) -> str:
    """A POSIX sh script that runs ``tool "$@"`` until it succeeds or ``deadline`` seconds have
    passed, each attempt under ``timeout`` for what is left, and exits 1 after that. The
    retries stay inside the container: the kubelet restarts a failed init container, and a
    restart count above 0 makes a LeaderWorkerSet recreate the whole group once none of its pods
    is Pending (kubernetes-sigs/lws@v0.10.0 pkg/controllers/pod_controller.go
    handleRestartPolicy, pkg/utils/pod/pod_utils.go ContainerRestarted), so one slow or failed
    attempt on one node would restart every node's sync. The tool's arguments come from the
    container's ``args`` (``sh -c SCRIPT NAME ARGS...``), never from the script's text."""
    return (
        f"deadline={deadline}; end=$(($(date +%s) + deadline)); "
        'while :; do left=$((end - $(date +%s))); [ "$left" -gt 0 ] || '
        '{ echo "fetch-model: no complete sync in ${deadline} s" >&2; exit 1; }; '
        f'timeout "$left" {tool} "$@" && exit 0; '
        f'echo "fetch-model: sync failed, retrying in {RETRY_PAUSE_SECONDS} s" >&2; '
        f"sleep {RETRY_PAUSE_SECONDS}; done"
    )


def fetch_container(
    spec: Spec, s3_uri: str, cache: int, run_as_user: int, size: tuple[str, str]
) -> Container:
    """The init container that syncs the checkpoint from S3, retrying until a deadline
    (:func:`retrying`; init containers have no deadline of their own, and the pod-wide
    activeDeadlineSeconds would also end the server), sized for the cache (an upper bound of
    the download) at ``startup.downloadGbps``. A sync that is retried only fetches what is
    still missing.

    IRSA: s5cmd, built for throughput (a global --numworkers pool of files and --concurrency
    parts per file; "if you have a few, large files to download ... setting --concurrency to a
    higher value may have a better impact", peak/s5cmd@v2.3.0 README). EKS Pod Identity: the
    AWS CLI, because s5cmd 2.3.0 is built on aws-sdk-go v1.44.298 and Pod Identity needs Go SDK
    v1 1.47.11 (AWS CLI v2 2.15.0; EKS user guide, pod-id-minimum-sdk), with more concurrent
    requests and larger parts than its defaults of 10 and 8 MB
    (docs.aws.amazon.com/cli/latest/topic/s3-config.html)."""
    deadline = fetch_deadline_seconds(spec, cache)
    dest = f"{MODEL_DIR}/model"
    excludes = [word for pattern in EXCLUDED_FROM_SYNC for word in ("--exclude", pattern)]
    if spec.service_account.pod_identity:
        script = " && ".join(
            [
                f"aws configure set default.s3.max_concurrent_requests {AWS_CLI_CONCURRENCY}",
                f"aws configure set default.s3.multipart_chunksize {AWS_CLI_CHUNK}",
                retrying(deadline, "aws"),
            ]
        )
        image = AWS_CLI_IMAGE
        args: tuple[str, ...] = (
            *("s3", "sync", "--only-show-errors", "--no-progress", *excludes, s3_uri, dest),
        )
    else:
        image, script = S5CMD_IMAGE, retrying(deadline, "/s5cmd")
        args = (
            *("--log", "error", "--numworkers", str(S5CMD_WORKERS), "sync"),
            *("--concurrency", str(S5CMD_PARTS), *excludes),
            s3_uri + ("*" if s3_uri.endswith("/") else "/*"),  # the prefix's objects
            f"{dest}/",
        )
    return Container(
        name="fetch-model",
        image=image,
        command=("/bin/sh", "-c", script, "fetch-model"),
        args=args,
        env=(EnvVar("HOME", "/tmp"),),
        ports=(),
        mounts=(Mount("models", MODEL_DIR), Mount("tmp", "/tmp")),
        # TLS at several Gbit/s needs cores; a few GiB cover the tools' part buffers.
        resources=Resources(cpu=size[0], memory=size[1], ephemeral_storage=None, gpus=0),
        run_as_user=run_as_user,
        deadline_seconds=deadline,
    )


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


def model_loading(
    spec: Spec, cache: int, run_as_user: int, fetch_size: tuple[str, str] = ("2", "4Gi")
) -> Loading:
    """huggingface: the server downloads (token as a file); s3: an init container syncs
    ``s3Uri`` into /models/model (``fetch_size``: its CPU and memory); pvc: the volume's root
    holds the model files, read-only and offline. ``cache`` GiB is the cache ``emptyDir`` (not
    for pvc)."""
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
        init = (fetch_container(spec, loading.s3_uri, cache, run_as_user, fetch_size),)
    return Loading(
        env=tuple(env),
        mounts=tuple(mounts),
        volumes=tuple(volumes),
        init_containers=init,
        disk_gib=0 if loading.mode == "pvc" else cache,
    )
