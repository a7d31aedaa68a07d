"""The engine build as a Kubernetes Job (backend engine; issue 11 item 16): ``build-engine.sh``
from the ConfigMap, in the serving image, on a whole node of the serving NodePool.

Rules, each with its reason:

- **Same GPU architecture as serving**: an engine only loads on the architecture and in the
  TensorRT-LLM that built it (shared/reference/trtllm.md §1), so the pod selects the rendered
  NodePool (``karpenter.sh/nodepool``) and runs the serving image; the script checks both.
- **The whole node**: ``quantize.py`` spreads the 16-bit model over every visible GPU while it
  calibrates, ``trtllm-build --workers`` uses TP of them; serving replicas cannot start before
  the engine exists, so nothing else wants the node.
- **The name is a hash of the build inputs**: a Job's pod template is immutable. Same inputs,
  same name: ``kubectl apply`` and GitOps see the existing Job and change nothing; new inputs,
  a new Job (the old one is pruned or stays as a record). A finished Job is kept unless
  ``buildJob.ttlSecondsAfterFinished`` is set, because a controller that finds it deleted
  re-creates it; the script then exits early when S3 already holds this build.
- **Failures**: evictions (spot, Karpenter) do not count against ``backoffLimit``
  (``DisruptionTarget`` -> Ignore); the script's own precondition errors exit 3 and fail the
  Job at once (retrying cannot fix a wrong image or GPU).
- **Credentials**: IRSA (the EC2NodeClass blocks instance-profile credentials for pods with
  ``httpPutResponseHopLimit: 1``); the Hugging Face token is a mounted file (``HF_TOKEN_PATH``).
- **Egress**: huggingface.co and the storage hosts it redirects downloads to (the checkpoint,
  and for quantize.py, AWQ/FP8/FP8-KV, the ``cnn_dailymail`` 3.0.0 calibration dataset:
  ``--calib_dataset`` default, ModelOpt ``dataset_utils.py``), the S3 endpoint of the artifacts
  bucket, and github.com only if the image lacks the example scripts.
"""

from __future__ import annotations

import hashlib
import json
import math

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.trtllm.decisions import TrtllmPlan
from llmdeploy.engines.trtllm.serving import CONFIG_DIR, CONFIG_VOLUME
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.plan.capacity import allowed_instances
from llmdeploy.plan.loading import AWS_CLI_IMAGE, hf_token_file
from llmdeploy.plan.names import dns_name, labels_for, pool_name
from llmdeploy.plan.pod import GPU_TAINT, shm_size
from llmdeploy.plan.types import (
    KV,
    Container,
    EnvVar,
    JobPlan,
    Meta,
    Mount,
    Resources,
    Volume,
)
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import Sizing
from llmdeploy.spec.cluster import reserve_of
from llmdeploy.spec.sections import Spec

BUILD_SCRIPT = "build-engine.sh"
PRECONDITION_EXIT = 3  # build-engine.sh `die`: wrong image, GPU, tools or files
WORKSPACE = "/workspace"
# amazon/aws-cli installs AWS CLI v2 at /usr/local/aws-cli (aws/aws-cli docker/Dockerfile runs
# the bundle's installer): a version directory v2/<version> whose bin/aws is a relative link
# into its dist/, and v2/current, an absolute link to that directory (aws/aws-cli
# exe/assets/install: setup_install_bin `ln -s "../dist/aws"`, create_current_symlink
# `ln -snf "$INSTALL_DIR" ...`). Copied as it is, v2/current dangles in the Triton image, so the
# init container copies the directory it resolves to: bin/aws then resolves inside the copy,
# no pip and no PyPI egress.
AWS_CLI_CURRENT, AWS_CLI_DIR = "/usr/local/aws-cli/v2/current", "/opt/llmdeploy/aws-cli"
RUN_AS_USER = 1000  # the NGC Triton image's `triton-server` user, as for the server


def build_hash(t: TrtllmPlan) -> str:
    """10 hex digits over everything that decides the engine and where it goes."""
    inputs = {
        "build_info": [(kv.key, kv.value) for kv in t.build_info],
        "steps": [[s.tool, s.script, [(a.flag, a.value) for a in s.args]] for s in t.build_steps],
        "artifacts": t.artifacts_s3_uri,
        "model_s3_uri": t.model_s3_uri,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:10]


def workspace_gib(spec: Spec, sizing: Sizing) -> int:
    """/workspace: the download (the checkpoint as stored, 16-bit for the quantize.py recipes),
    the converted checkpoint and the engine (each about the serving weights), with 10% and
    20 GiB of headroom."""
    engine = sizing.weights_gib_per_gpu * spec.hardware.tensor_parallel
    return math.ceil((sizing.checkpoint_gib + 2 * engine) * 1.1 + 20)


def _whole_node(spec: Spec, allowed: tuple[Instance, ...], work_gib: int) -> Resources:
    """Every GPU, and the CPU and memory the smallest allowed type has beside the DaemonSet
    reserve; requests equal limits."""
    reserve = reserve_of(spec)
    shares = [i.pod_share(i.gpu_count, reserve) for i in allowed]
    cpu_milli, mem_mib = min(c for c, _ in shares), min(m for _, m in shares)
    return Resources(
        cpu=str(max(1, cpu_milli // 1000)),
        memory=f"{max(4, mem_mib // 1024)}Gi",
        ephemeral_storage=f"{work_gib}Gi",
        gpus=allowed[0].gpu_count,  # the same on every allowed type (same plan)
    )


def plan_build_job(spec: Spec, instance: Instance, sizing: Sizing, t: TrtllmPlan) -> JobPlan:
    engine = spec.engine
    assert isinstance(engine, TrtllmEngine)
    job = engine.build_job
    work = workspace_gib(spec, sizing)
    # Any type the NodePool allows may run it: size it for the smallest (plan.capacity).
    allowed = allowed_instances(spec, instance)
    nvme_gib = min(i.local_nvme_gb for i in allowed) * 1e9 / mem.GIB
    if work > nvme_gib:
        raise SpecError(
            [
                Diagnostic(
                    f"the engine build needs about {work} GiB of scratch space; {instance.name} "
                    f"has {nvme_gib:.0f} GiB of local NVMe",
                    hint="set engine.buildJob.enabled false and build on a larger machine",
                )
            ]
        )
    version = engine.triton_version
    instance_label = dns_name(spec.name, "engine-build")
    labels = tuple(
        KV(kv.key, instance_label) if kv.key == "app.kubernetes.io/instance" else kv
        for kv in labels_for(spec, "engine-build", version)
    )
    # A selector-distinct instance label: the serving Service, PDB and NetworkPolicy select
    # name + instance, so they never count or route to the build pod; its own NetworkPolicy
    # (no ingress at all) selects it by the same two labels.
    selector = tuple(
        kv for kv in labels if kv.key in ("app.kubernetes.io/name", "app.kubernetes.io/instance")
    )
    meta = Meta(
        name=dns_name(spec.name, "build", build_hash(t)),
        namespace=spec.namespace,
        labels=labels,
        selector=selector,
    )
    own_sa = job.iam_role_arn is not None
    sa_name = instance_label if own_sa else spec.name
    env = [
        EnvVar("HOME", f"{WORKSPACE}/home"),
        EnvVar("USER", "triton-server"),
        EnvVar("TMPDIR", f"{WORKSPACE}/tmp"),
        EnvVar("HF_HOME", f"{WORKSPACE}/hf-home"),
        EnvVar("AWS_CLI", f"{AWS_CLI_DIR}/bin/aws"),
        EnvVar("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
    ]
    mounts = [
        Mount("workspace", WORKSPACE),
        Mount("dshm", "/dev/shm"),
        Mount("aws-cli", AWS_CLI_DIR, read_only=True),
        Mount(CONFIG_VOLUME, CONFIG_DIR, read_only=True),
    ]
    volumes = [
        Volume("workspace", "emptyDir", size_limit=f"{work}Gi"),
        Volume("dshm", "memory", size_limit=shm_size(instance.gpu_count)),
        Volume("aws-cli", "emptyDir", size_limit="1Gi"),
        Volume(CONFIG_VOLUME, "configMap", config_map=spec.name),
    ]
    loading = spec.model.loading
    if loading.mode == "huggingface" and loading.hf_token_secret is not None:
        var, mount, volume = hf_token_file(loading.hf_token_secret)
        env.append(var)
        mounts.append(mount)
        volumes.append(volume)
    copy_cli = Container(
        name="aws-cli",
        image=AWS_CLI_IMAGE,
        command=("/bin/sh", "-c", f'cp -a "$(readlink -f {AWS_CLI_CURRENT})/." {AWS_CLI_DIR}/'),
        args=(),
        env=(),
        ports=(),
        mounts=(Mount("aws-cli", AWS_CLI_DIR),),
        resources=Resources(cpu="1", memory="1Gi", ephemeral_storage=None, gpus=0),
        run_as_user=RUN_AS_USER,
    )
    build = Container(
        name="build",
        image=t.image,
        command=("bash", f"{CONFIG_DIR}/{BUILD_SCRIPT}"),
        args=(),
        env=tuple(env),
        ports=(),
        mounts=tuple(mounts),
        resources=_whole_node(spec, allowed, work),
        # OpenMPI and ModelOpt's extension builds write outside the mounted paths, as for the
        # Triton server (docs/security.md, CKV_K8S_22)
        read_only_root=False,
        run_as_user=RUN_AS_USER,
    )
    return JobPlan(
        meta=meta,
        service_account=sa_name,
        service_account_meta=(
            Meta(name=sa_name, namespace=spec.namespace, labels=labels, selector=())
            if own_sa
            else None
        ),
        network_policy_meta=Meta(
            name=instance_label, namespace=spec.namespace, labels=labels, selector=selector
        ),
        service_account_annotations=(
            (KV("eks.amazonaws.com/role-arn", job.iam_role_arn),) if job.iam_role_arn else ()
        ),
        backoff_limit=job.backoff_limit,
        active_deadline_seconds=job.active_deadline_seconds,
        ttl_seconds_after_finished=job.ttl_seconds_after_finished,
        fail_job_exit_codes=(PRECONDITION_EXIT,),
        pod_labels=labels,
        # Karpenter must not consolidate or drift the node away under an hours-long build.
        pod_annotations=(KV("karpenter.sh/do-not-disrupt", "true"),),
        node_selector=(KV("karpenter.sh/nodepool", pool_name(spec)),),
        tolerations=(GPU_TAINT,),
        init_containers=(copy_cli,),
        containers=(build,),
        volumes=tuple(volumes),
        fs_group=RUN_AS_USER,
        termination_grace=60,
    )
