"""The features that ride on a batch, each in a module of its own.

The engine (``runtime/engine.py``) sequences a batch — poll, decide its shape, run it, commit,
the work after the commit — and asks a feature when the batch needs it. A feature receives what
it needs (the run's :class:`~..context.RunContext`, the plan's :class:`~..bundle.Bundle`, the
batch's reads) and returns values; it never receives the engine, and features never import each
other (``tests/compiler/test_layers.py`` checks both):

* ``prepared_batches`` — plans built once and replayed (capture, capture ahead, warm-up);
* ``adaptive_joins`` — join matrices re-mapped and hash joins switched to hybrids (Algorithm 2);
* ``strategies`` — the cost model's choice per batch, recompute batches, rebuilds of stale states;
* ``reconfiguration`` — a new plan installed between two batches;
* ``maintenance`` — after a commit: the changelogs compacted, runs started, tails folded;
* ``sinks`` — after a commit: each sink given the committed batches it lacks (``docs/sinks.md``).
"""
