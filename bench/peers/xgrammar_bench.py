#!/usr/bin/env python3
"""XGrammar on the same replay as `grid bench`.

Reads what `grid bench-export` wrote (vocab.json, statements.jsonl, grammars/<db>.ebnf),
builds XGrammar's tokenizer info from the same token byte list (special ids as empty
strings, so that no grammar admits them; EOS is the stop token), compiles each database's
EBNF once (timed as compile_ms), and replays every statement's ids from the empty prefix:
at each step `fill_next_token_bitmask` (the only timed call) must admit the next id, which
is then accepted; after the last id EOS must be admitted. Repetition 0 is cold, the others
warm. The output has the shape of `grid bench`'s; the last line is

  {"vocab":...,"steps":N,"engines":{"xgrammar":{"p50_us":...,...}}}

Usage: xgrammar_bench.py EXPORT_DIR [--reps N] [--threads N]
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path


def percentiles(ns):
    """Nearest-rank percentiles of nanosecond times, in microseconds (as bench_stats.rs)."""
    ns = sorted(ns)
    if not ns:
        return {"p50_us": 0.0, "p90_us": 0.0, "p99_us": 0.0, "max_us": 0.0}

    def at(p):
        rank = min(max(math.ceil(p * len(ns) / 100), 1), len(ns))
        return round(ns[rank - 1] / 1000, 2)

    return {"p50_us": at(50), "p90_us": at(90), "p99_us": at(99), "max_us": round(ns[-1] / 1000, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export_dir", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="XGrammar compiler threads")
    a = ap.parse_args()
    if a.reps < 2:
        sys.exit("xgrammar_bench: --reps must be at least 2 (one cold, one warm)")

    import xgrammar as xgr  # imported late: --help works without the venv

    v = json.loads((a.export_dir / "vocab.json").read_text())
    special = set(v["special"])
    eos = v["eos"]
    tokens = [b"" if i in special and i != eos else bytes.fromhex(h) for i, h in enumerate(v["tokens_hex"])]
    statements = [json.loads(l) for l in (a.export_dir / "statements.jsonl").read_text().splitlines() if l]
    steps = sum(len(s["ids"]) + 1 for s in statements)
    t0 = time.perf_counter()
    info = xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=[eos])
    compiler = xgr.GrammarCompiler(info, max_threads=a.threads, cache_enabled=False)
    setup_ms = (time.perf_counter() - t0) * 1e3
    print(f"xgrammar: {v['vocab']}: {len(tokens)} tokens, {len(statements)} statements, "
          f"{steps} steps per repetition", file=sys.stderr)

    compiled, compiles = {}, []
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    words = bitmask.numpy()[0]
    cold, warm = [], []
    rejected = 0
    for rep in range(a.reps):
        times = cold if rep == 0 else warm
        for s in statements:
            db, ids = s["db"], s["ids"]
            if db not in compiled:
                src = (a.export_dir / "grammars" / f"{db}.ebnf").read_text()
                t = time.perf_counter()
                compiled[db] = compiler.compile_grammar(src)
                compiles.append(time.perf_counter() - t)
                print(f"xgrammar: compiled {db} in {compiles[-1] * 1e3:.0f} ms", file=sys.stderr)
            m = xgr.GrammarMatcher(compiled[db])
            for step in range(len(ids) + 1):
                t = time.perf_counter_ns()
                m.fill_next_token_bitmask(bitmask)
                times.append(time.perf_counter_ns() - t)
                want = ids[step] if step < len(ids) else eos
                admitted = (int(words[want >> 5]) >> (want & 31)) & 1
                if not admitted or (step < len(ids) and not m.accept_token(want)):
                    rejected += 1
                    if rep == 0:
                        print(json.dumps({"kind": "rejected", "engine": "xgrammar", "line": s["line"],
                                          "db": db, "step": step}), file=sys.stderr)
                    break
        print(f"xgrammar: {v['vocab']}: repetition {rep + 1} of {a.reps} done", file=sys.stderr)

    w, c = percentiles(warm), percentiles(cold)
    compile_ms = round(sum(compiles) * 1e3 / max(len(compiles), 1), 2)
    rej = rejected // a.reps
    print(f"{'engine':<11} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>10} {'compile_ms':>11} "
          f"{'cold_p50':>9} {'cold_p99':>9} {'rejected':>9}  (µs; {v['vocab']}, warm of {a.reps} reps)")
    print(f"{'xgrammar':<11} {w['p50_us']:>9} {w['p90_us']:>9} {w['p99_us']:>9} {w['max_us']:>10} "
          f"{compile_ms:>11} {c['p50_us']:>9} {c['p99_us']:>9} {rej:>9}")
    engine = dict(w, compile_ms=compile_ms, hit_rate=None, steps=len(warm), rejected=rej,
                  grammars=len(compiles), setup_ms=round(setup_ms), cold=c)
    print(json.dumps({"vocab": v["vocab"], "steps": steps, "engines": {"xgrammar": engine}},
                     separators=(",", ":")))


if __name__ == "__main__":
    main()
