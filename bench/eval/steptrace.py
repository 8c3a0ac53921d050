"""The endpoint's step trace (`grid-endpoint serve --trace-steps`): one JSON line per step
request, with when it arrived and was replied to and the model thread's time in it.
bench/overlap.sh and run.py's --concurrent read it the same way."""

import json
import os

PREFIX = '{"grid_endpoint_step"'


def steps(path):
    """The trace lines of the endpoint's log at `path`, in order (none without one)."""
    if not path or not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [json.loads(line) for line in f if line.startswith(PREFIX)]


def span_and_model(mine):
    """(span, model) of consecutive steps `mine`, in ms: from the first request's arrival
    to the last reply, and the model thread's time inside it (each step's own work and the
    pass it ran ahead, except the last step's, which runs after the span)."""
    span = mine[-1]["replied_ms"] - mine[0]["queued_ms"]
    model = sum(s["step_ms"] + s["ahead_ms"] for s in mine) - mine[-1]["ahead_ms"]
    return span, model
