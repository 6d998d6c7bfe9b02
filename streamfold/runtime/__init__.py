"""The runtime: run incremental plans on Spark, exactly once, with the public output contract.

With ``bench``, the only package that imports pyspark, and it does so lazily, so the compiler and
``explain`` work without a JVM.
"""
