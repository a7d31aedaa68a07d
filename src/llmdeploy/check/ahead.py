"""The check stage in a second process, started before the render (issue 25, sixth pass).

A cold ``render`` spends about a fifth of its CPU validating: importing jsonschema-rs, CEL and
protobuf's descriptor pool, reading kubernetes-validate's definitions, building a validator per
kind and compiling the CRDs' CEL rules, then checking the documents. None of it needs the
spec, so on a machine with a second core it can run while the render runs. :func:`start`
(called by the console script before it imports the commands, while the process has one thread)
forks a child that imports the validator and waits. When the render knows its Kubernetes
version, :func:`prepare` asks the child to build the validators of the kinds a render
validates (:data:`RENDERED_KINDS`; it stops as soon as the documents arrive). :func:`check_files`
sends the rendered files and reads the child's :class:`CheckReport` back; the child answers
that one render and exits, while this process writes the files (a fleet's further specs are
validated here, by the process or its workers).

The child only saves time; it never decides anything the process would not. Any failure of
it (no ``fork``, threads already running, a closed pipe, an error while checking, an answer
that is not a report, no answer within :data:`REPLY_TIMEOUT_S`) makes :func:`check_files`
validate in this process, as it did before, so errors, messages and exit codes are the ones
in-process validation gives. Only the bundled CRD schemas are checked there (``--crd-dir``
parses the user's CRDs in this process anyway); ``LLMDEPLOY_CHECK_AHEAD=0`` turns it off.
The child's standard streams are ``/dev/null`` (a caller reading this process's output never
waits for it) and it ignores SIGINT. :func:`stop`, when the command is done, reaps it (and
kills it first if it is still running); should this process die first, the child reads the
end of the pipe and exits, with ``os._exit`` (no ``atexit``, no flushing) as always.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmdeploy.check.crd import CrdRegistry
    from llmdeploy.check.documents import CheckReport

# The kinds most renders validate, the most often rendered first (the order the child prepares
# them in); a kind left out (a Job, a LeaderWorkerSet: a few presets render one) is built when a
# document needs it, as in-process. tests/test_check_ahead.py keeps the list current.
RENDERED_KINDS: tuple[tuple[str, str], ...] = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("v1", "Namespace"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("policy/v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("v1", "ConfigMap"),
)

ENV = "LLMDEPLOY_CHECK_AHEAD"  # "0": validate in this process
REPLY_TIMEOUT_S = 120.0  # a child that has not answered by then is stopped: validated here

_HEADER = 8  # bytes of a message's length, big-endian


class _Child:
    """The forked validator, seen from the process that started it."""

    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.owner = os.getpid()  # a fleet's forked workers inherit this object: not theirs
        self.pid, self.requests, self.replies = pid, requests, replies
        self.done = False  # it has answered (or failed) its one check

    def send(self, message: Any) -> bool:
        import pickle

        try:
            _write(self.requests, pickle.dumps(message))
        except OSError:  # the child is gone
            return False
        return True

    def receive(self) -> Any:
        """The child's answer, or None when it has none (exited, broke the frame, timed out)."""
        import pickle
        import select

        try:
            ready, _, _ = select.select([self.replies], [], [], REPLY_TIMEOUT_S)
            if not ready:
                return None  # stop() kills it
            data = _read(self.replies)
            return None if data is None else pickle.loads(data)
        except Exception:  # a broken pipe or a truncated answer: validate here
            return None

    def close(self) -> None:
        """Stop the child and reap it: no process outlives this one, and its CPU time counts
        with this process's (``getrusage``, ``time``)."""
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            if os.waitpid(self.pid, os.WNOHANG) == (0, 0):  # still running: not needed now
                import signal

                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)


_CHILD: list[_Child] = []  # at most one, owned by the process that forked it


def _write(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(_HEADER, "big") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None  # end of file: the other side closed its end
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read(fd: int) -> bytes | None:
    header = _read_exactly(fd, _HEADER)
    return None if header is None else _read_exactly(fd, int.from_bytes(header, "big"))


def wanted(args: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether the command line is a render the child can validate: ``render`` named first
    (as :func:`llmdeploy.cli.commands.app_for` reads it), the bundled CRD schemas, no help."""
    if not args or args[0] != "render" or environ.get(ENV) == "0":
        return False
    if environ.get("LLMDEPLOY_CRD_DIR"):
        return False
    return not any(a == "--help" or a == "--crd-dir" or a.startswith("--crd-dir=") for a in args)


def start(args: Sequence[str]) -> bool:
    """Fork the validator if the command line wants one and this process can: POSIX ``fork``,
    one thread, none started already. Whether a child runs."""
    if _CHILD or not wanted(args, os.environ) or not hasattr(os, "fork"):
        return False
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False  # fork copies one thread: a lock another one holds would never be freed
    try:
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
    except OSError:
        return False
    try:
        pid = os.fork()
    except OSError:
        for fd in (requests_r, requests_w, replies_r, replies_w):
            os.close(fd)
        return False
    if pid == 0:  # pragma: no cover - the child; tests/test_check_ahead.py runs it
        try:
            os.close(requests_w)
            os.close(replies_r)
            _serve(requests_r, replies_w)
        finally:
            os._exit(0)
    os.close(requests_r)
    os.close(replies_w)
    _CHILD.append(_Child(pid, requests_w, replies_r))
    return True


def _child() -> _Child | None:
    """The validator this process started, if it is still there."""
    return _CHILD[0] if _CHILD and _CHILD[0].owner == os.getpid() else None


def _usable() -> _Child | None:
    child = _child()
    return child if child is not None and not child.done else None


def stop() -> None:
    """Close the pipe (the child exits at once) and forget the child."""
    child = _child()
    if child is not None:
        child.close()
    _CHILD.clear()


def prepare(kube_version: str) -> None:
    """Tell the child the Kubernetes version to build the validators of :data:`RENDERED_KINDS`
    for; nothing when no child runs."""
    child = _usable()
    if child is not None and not child.send(("prepare", kube_version)):
        child.done = True


def check_files(
    files: Sequence[tuple[str, str]], *, crds: CrdRegistry | None, kube_version: str
) -> CheckReport:
    """:func:`~llmdeploy.check.documents.check_documents` of the rendered files' documents
    (:func:`~llmdeploy.check.documents.rendered_documents`): the child's report when it has
    one, else validated here (which raises the errors validation raises)."""
    from llmdeploy.check import documents

    child = _usable()
    if child is not None and crds is not None and crds.bundled:
        answer = child.receive() if child.send(("check", tuple(files), kube_version)) else None
        # it answers one render and exits (a fleet's other specs are validated here); stop()
        # reaps it when the command is done
        child.done = True
        if isinstance(answer, documents.CheckReport):
            return answer
    return documents.check_documents(
        documents.rendered_documents(files), crds=crds, kube_version=kube_version
    )


def _serve(requests: int, replies: int) -> None:  # pragma: no cover - runs in the child
    """The child: its streams to /dev/null, the validator imported, then one request at a time
    until the parent closes the pipe. A request that fails is answered with None."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    import pickle

    from llmdeploy.check import cel, documents
    from llmdeploy.check.bundled import bundled_registry

    crds = bundled_registry()
    cel.compile_rule("self")  # the CEL environment (protobuf's descriptor pool)
    while (data := _read(requests)) is not None:
        request = pickle.loads(data)
        if request[0] == "prepare":
            _prepare(requests, crds, request[1])
            continue
        _, files, kube_version = request
        try:
            answer: Any = documents.check_documents(
                documents.rendered_documents(files), crds=crds, kube_version=kube_version
            )
        except Exception:  # the parent validates again and raises it itself
            answer = None
        _write(replies, pickle.dumps(answer))
        return  # one render: exiting now overlaps the exit with the parent's writing


def _prepare(requests: int, crds: CrdRegistry, kube_version: str) -> None:  # pragma: no cover
    """Build the validators of :data:`RENDERED_KINDS` until a request arrives."""
    import select

    from llmdeploy.check import documents

    for api_version, kind in RENDERED_KINDS:
        if select.select([requests], [], [], 0)[0]:
            return  # the documents (or the end): they come first
        try:
            documents.prepare_kind(api_version, kind, crds=crds, kube_version=kube_version)
        except Exception:  # an unknown version: the check reports it
            return
