"""The vLLM side of a replica on several nodes: the leader's and the workers' containers
(:mod:`llmdeploy.engines.vllm.distributed` explains the two executors) and the Ray start-up
scripts. :mod:`llmdeploy.plan.group` holds what every engine's group shares (LWS, EFA)."""

from __future__ import annotations

import dataclasses
from typing import Any

from llmdeploy.engines.vllm.distributed import MASTER_PORT, RAY_PORT, Distributed
from llmdeploy.engines.vllm.options import server_args
from llmdeploy.plan.group import LEADER_ADDRESS_ENV
from llmdeploy.plan.types import ConfigEntry, Container, Mount, Resources, TemplateText, Volume
from llmdeploy.spec.sections import Spec

SCRIPTS_VOLUME = "scripts"
SCRIPTS_DIR = "/etc/llmdeploy"
RAY_LEADER = "ray-leader.sh"
RAY_WORKER = "ray-worker.sh"
# How long a Ray worker keeps trying to join the head, and the head waits for the whole group
# (seconds): the nodes of one group launch together, but images and models load at their pace.
RAY_JOIN_SECONDS = 1800
_SCRIPTS_MOUNT = Mount(SCRIPTS_VOLUME, SCRIPTS_DIR, read_only=True)


def uses_scripts(dist: Distributed) -> bool:
    return dist.nodes > 1 and dist.backend == "ray"


def scripts(spec: Spec) -> tuple[tuple[ConfigEntry, ...], Volume]:
    """The Ray start-up scripts (ConfigMap entries) and the volume that mounts them."""
    context = (("ray_port", RAY_PORT), ("seconds", RAY_JOIN_SECONDS))
    entries = tuple(
        ConfigEntry(name, TemplateText(f"vllm/{name}.j2", context))
        for name in (RAY_LEADER, RAY_WORKER)
    )
    return entries, Volume(SCRIPTS_VOLUME, "configMap", config_map=spec.name)


def leader(server: Container, dist: Distributed) -> Container:
    """The group's leader: the server itself (mp), or the server started by the Ray head
    script once every pod of the group has joined (ray)."""
    if not uses_scripts(dist):
        return server
    return dataclasses.replace(
        server,
        command=("bash", f"{SCRIPTS_DIR}/{RAY_LEADER}"),
        args=(*server.command, *server.args),
        mounts=(*server.mounts, _SCRIPTS_MOUNT),
    )


def worker(
    spec: Spec, server: Container, quantization: str | None, dist: Distributed
) -> tuple[tuple[Container, ...], Container]:
    """A worker pod's extra init containers and its container: the same server with
    ``--headless`` and its node rank (mp), or a Ray worker node (ray). It serves no API, so it
    has no port and no probe: the leader's probes cover the group, and a worker that exits
    restarts the whole group (``plan.group.RESTART_POLICY``)."""
    if uses_scripts(dist):
        ray_worker = _serving_nothing(
            server,
            command=("bash", f"{SCRIPTS_DIR}/{RAY_WORKER}"),
            args=(),
            mounts=(*server.mounts, _SCRIPTS_MOUNT),
        )
        return (), ray_worker
    args = server_args(spec, quantization, dataclasses.replace(dist, role="worker"))
    return (_wait_for_leader(server),), _serving_nothing(server, args=args)


def _serving_nothing(server: Container, **changes: Any) -> Container:
    return dataclasses.replace(
        server,
        ports=(),
        startup_probe=None,
        readiness_probe=None,
        liveness_probe=None,
        pre_stop_sleep=None,
        **changes,
    )


def _wait_for_leader(server: Container) -> Container:
    """Hold the worker until the leader listens on the master port. A worker that starts
    first would otherwise give up connecting to the leader's store and exit, and its restart
    recreates the whole group (docs/multinode.md, "start-up race")."""
    probe = (
        f'until (exec 3<>"/dev/tcp/${{{LEADER_ADDRESS_ENV}}}/{MASTER_PORT}") 2>/dev/null; '
        f'do echo "waiting for the leader ${{{LEADER_ADDRESS_ENV}}}:{MASTER_PORT}"; sleep 5; done'
    )
    return Container(
        name="wait-for-leader",
        image=server.image,  # already on the node for the server; has bash
        command=("bash", "-c", probe),
        args=(),
        env=(),
        ports=(),
        mounts=(),
        resources=Resources(cpu="1", memory="1Gi", ephemeral_storage=None, gpus=0),
        run_as_user=server.run_as_user,
    )
