"""The performance stage: TTFT, ITL, throughput and cost of the sized configuration at the
spec's SLO load, and a verdict against the SLO (docs/performance-model.md).

Between sizing and plan. The generic model (``types``, ``step``, ``sim``, ``sim_state``,
``lengths``, ``api``) is pure arithmetic over frozen dataclasses, standard library only; each
engine plug-in supplies its fitted constants and how it runs a replica
(:meth:`llmdeploy.engines.base.Engine.perf_config`); ``inputs`` maps the catalogs and the
sizing to the model's inputs and ``assess`` turns an estimate into the stage's result.
"""
