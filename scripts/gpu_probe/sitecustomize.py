"""Step probe for vLLM 0.24 on the GPU machine (issue 22, seventh lease).

Put this directory first on PYTHONPATH and set VLLM_STEP_PROBE=DIR: every Python process that
imports vLLM's engine core (the API server and the EngineCore process) appends one JSON line
per event to DIR/probe-PID.jsonl. The probe changes nothing in vLLM; it wraps

    s  Scheduler.schedule            t0 t1 seq tok new run wait (scheduled tokens, new
                                     requests, running and waiting requests)
    u  Scheduler.update_from_output  t0 t1 seq (the step's outputs reach the scheduler)
    x  GPUModelRunner.execute_model  t0 t1 seq (host: input preparation and launches)
    m  the CUDA graph mode vLLM picks for the step, and the tokens it pads to
    a  EngineCore.add_request        t0 t1
    g  a garbage collection over 0.5 ms: gen t0 t1

Times are ``time.monotonic()``, the clock of vLLM's own ``EngineCoreOutputs.timestamp``.
Records are kept in memory and written by a thread every 5 s, so the engine's loop does no I/O.
``.gpu/serve-sweep.sh`` sets it up when PROBE=1 (docs/performance-model.md, "Measured on one
H200"). In vLLM 0.24.0 the GPU model runner of the default path is not the module hooked here,
so the seventh lease's files hold the s, u, a and g events only.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
from typing import Any

_DIR = os.environ.get("VLLM_STEP_PROBE")
_mono = time.monotonic
_buf: list[dict[str, Any]] = []
_files: list[Any] = []
_seq = [0]
_cur = [-1]
_gc_t0 = [0.0]


def _out(rec: dict[str, Any]) -> None:
    _buf.append(rec)


def _flush() -> None:
    n = len(_buf)
    if not n:
        return
    recs = _buf[:n]
    del _buf[:n]
    if not _files:
        os.makedirs(str(_DIR), exist_ok=True)
        path = os.path.join(str(_DIR), f"probe-{os.getpid()}.jsonl")
        _files.append(open(path, "a"))  # noqa: SIM115 - open for the process's life
    _files[0].write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
    _files[0].flush()


def _periodic() -> None:
    while True:
        time.sleep(5.0)
        with contextlib.suppress(Exception):
            _flush()


def _gc_callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_t0[0] = _mono()
        return
    t1 = _mono()
    if t1 - _gc_t0[0] > 0.0005:
        _out({"e": "g", "gen": info.get("generation"), "t0": _gc_t0[0], "t1": t1})


def _patch_scheduler(mod: Any) -> None:
    cls = mod.Scheduler
    schedule0, update0 = cls.schedule, cls.update_from_output

    def schedule(self: Any, *a: Any, **k: Any) -> Any:
        t0 = _mono()
        so = schedule0(self, *a, **k)
        t1 = _mono()
        _seq[0] += 1
        with contextlib.suppress(Exception):
            so._probe_seq = _seq[0]
        try:
            rec = {"e": "s", "seq": _seq[0], "t0": t0, "t1": t1}
            rec |= {"tok": so.total_num_scheduled_tokens, "new": len(so.scheduled_new_reqs)}
            rec |= {"run": len(self.running), "wait": len(self.waiting)}
            _out(rec)
        except Exception as ex:  # never break the engine
            _out({"e": "err", "where": "s", "msg": repr(ex)})
        return so

    def update_from_output(self: Any, so: Any, mo: Any, *a: Any, **k: Any) -> Any:
        t0 = _mono()
        r = update0(self, so, mo, *a, **k)
        _out({"e": "u", "seq": getattr(so, "_probe_seq", -1), "t0": t0, "t1": _mono()})
        return r

    cls.schedule, cls.update_from_output = schedule, update_from_output


def _patch_runner(mod: Any) -> None:
    cls = mod.GPUModelRunner
    execute0, determine0 = cls.execute_model, cls._determine_batch_execution_and_padding

    def execute_model(self: Any, so: Any, *a: Any, **k: Any) -> Any:
        t0 = _mono()
        _cur[0] = getattr(so, "_probe_seq", -1)
        r = execute0(self, so, *a, **k)
        _out({"e": "x", "seq": _cur[0], "t0": t0, "t1": _mono()})
        return r

    def determine(self: Any, num_tokens: int, *a: Any, **k: Any) -> Any:
        r = determine0(self, num_tokens, *a, **k)
        try:
            pad = int(getattr(r[1], "num_tokens", -1))
            _out({"e": "m", "seq": _cur[0], "n": int(num_tokens), "mode": str(r[0]), "pad": pad})
        except Exception as ex:
            _out({"e": "err", "where": "m", "msg": repr(ex)})
        return r

    cls.execute_model = execute_model
    cls._determine_batch_execution_and_padding = determine


def _patch_core(mod: Any) -> None:
    cls = mod.EngineCore
    add0 = cls.add_request

    def add_request(self: Any, *a: Any, **k: Any) -> Any:
        t0 = _mono()
        r = add0(self, *a, **k)
        _out({"e": "a", "t0": t0, "t1": _mono()})
        return r

    cls.add_request = add_request
    gc.callbacks.append(_gc_callback)
    threading.Thread(target=_periodic, daemon=True).start()


_HOOKS = {
    "vllm.v1.core.sched.scheduler": _patch_scheduler,
    "vllm.v1.worker.gpu_model_runner": _patch_runner,
    "vllm.v1.engine.core": _patch_core,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        try:
            _HOOKS[self.name](module)
            _out({"e": "patched", "mod": self.name, "pid": os.getpid()})
        except Exception as ex:
            _out({"e": "err", "where": self.name, "msg": repr(ex)})


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _HOOKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, name)
        return spec


if _DIR:
    import atexit

    atexit.register(_flush)
    sys.meta_path.insert(0, _Finder())
