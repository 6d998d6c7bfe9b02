#!/bin/bash
# A/B of two checkouts on the same TPC-H SF 1 data, --strategy incremental (stop 44, docs/benchmarks.md):
# usage: tpch_ab.sh QUERIES TAG NEW_CHECKOUT OLD_CHECKOUT OUT  (the old one e.g. `git worktree add ../old REV`;
# both run with NEW_CHECKOUT's .venv; logs and results in OUT/TAG-new.*, OUT/TAG-old.*)
Q=$1; TAG=$2; NEW=$3; OLD=$4; OUT=$5
for side in new old; do
  dir=$NEW; [ $side = old ] && dir=$OLD
  (cd $dir && STREAMFOLD_DRIVER_MEMORY=12g $NEW/.venv/bin/python -m streamfold bench tpch --sf 1 --increments 10 --queries $Q --strategy incremental --out $OUT/data > $OUT/$TAG-$side.log 2>&1)
  cp $OUT/data/tpch-sf1/results.md $OUT/$TAG-$side.md
  cp $OUT/data/tpch-sf1/results.json $OUT/$TAG-$side.json
done
