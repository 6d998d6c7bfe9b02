"""TPC-H as a coverage yardstick: the 22 queries, their data in batches with a deletion batch, the runner."""
