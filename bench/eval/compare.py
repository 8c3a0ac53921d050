"""Execution accuracy: whether a prediction's result denotes the gold's.

The rules are those of Spider's execution evaluation as test-suite-sql-eval implements it
(Zhong et al. 2020, `exec_eval.result_eq`), the evaluation behind Spider's EX figures:

- rows are a multiset: duplicates count, row order does not ...
- ... unless the gold statement orders its result: then the rows must come in the same
  order. test-suite looks for "order by" anywhere in the gold text; here only an ORDER BY
  at the statement's top level counts (`sqltext.orders_at_top`), because one inside a
  subquery does not order what PostgreSQL returns;
- columns: the same number of them, in any order (the results match when some
  permutation of the prediction's columns makes them match); names are ignored;
- two empty results match, whatever their columns;
- values: NULL matches NULL; text matches exactly (case and spaces count); numbers match
  by value whatever their type (bigint 3, numeric 3.000 and float 3.0 are one value), to
  12 significant digits, because PostgreSQL's numeric division and float arithmetic give
  one answer with different trailing digits (test-suite compares SQLite's values
  exactly, where both sides come from one engine's float arithmetic); other values
  (dates, booleans) by equality.
"""

import datetime
import json
import math
from collections import Counter
from decimal import Decimal

# More column permutations than this are not tried (only columns whose values agree as
# multisets are ever paired, so real results stay far below it).
MAX_PERMUTATIONS = 100_000


def value(v):
    """A result value in the form the comparison uses (hashable; equal when they match)."""
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, (float, Decimal)):
        if isinstance(v, float) and not math.isfinite(v):
            return ("float", repr(v))
        if isinstance(v, Decimal) and not v.is_finite():
            return ("float", str(v))
        if v == int(v) and abs(v) < 2**63:
            return int(v)
        return float(f"{float(v):.12g}")
    if isinstance(v, (datetime.date, datetime.time, datetime.timedelta)):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, (list, tuple)):
        return tuple(value(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def rows(result):
    """A fetched result as a list of tuples of comparison values."""
    return [tuple(value(v) for v in r) for r in result]


def _pairings(candidates, limit):
    """Assignments perm[i] = j (distinct j) with j in candidates[i], at most `limit`."""
    n = len(candidates)
    perm, used, count = [None] * n, set(), 0

    def go(i):
        nonlocal count
        if count >= limit:
            return
        if i == n:
            count += 1
            yield tuple(perm)
            return
        for j in candidates[i]:
            if j not in used:
                used.add(j)
                perm[i] = j
                yield from go(i + 1)
                used.discard(j)

    yield from go(0)


def same_result(pred, gold, ordered):
    """Whether `pred` matches `gold` (both lists of tuples from `rows`); `ordered` when the
    gold statement orders its result at the top level."""
    if not pred and not gold:
        return True
    if len(pred) != len(gold):
        return False
    ncol = len(gold[0])
    if any(len(r) != ncol for r in pred) or any(len(r) != ncol for r in gold):
        return False
    # A pairing of columns can only work where the two columns hold the same values.
    gold_cols = [Counter(r[i] for r in gold) for i in range(ncol)]
    pred_cols = [Counter(r[j] for r in pred) for j in range(ncol)]
    candidates = [[j for j in range(ncol) if pred_cols[j] == gold_cols[i]] for i in range(ncol)]
    if any(not c for c in candidates):
        return False
    gold_bag = None if ordered else Counter(gold)
    for perm in _pairings(candidates, MAX_PERMUTATIONS):
        permuted = [tuple(r[j] for j in perm) for r in pred]
        if ordered:
            if permuted == gold:
                return True
        elif Counter(permuted) == gold_bag:
            return True
    return False
