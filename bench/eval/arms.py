"""The arms of an evaluation: what a superuser session sets before it takes the asking
role (SET ROLE), and what every generation of the arm must show in grid.generations, so
that a run proves each arm ran as asked.

One entry per arm; adding an arm (issue 22's examples, issue 20's judge off) is one line.
`settings` are session settings (name -> value), applied with set_config before SET ROLE
and reset before the next arm; `audit` maps a column of grid.generations to the value
every generation of the arm must hold in it (a column the table does not have reads as
NULL), checked on the rows each ask wrote.

Assumed here, until the ablation setting lands in the extension: a superuser-only GUC
`grid.ablation` with values `no_repair` and `unconstrained`, recorded by the seal in a
column `grid.generations.ablation` (NULL for the shipped path). An arm whose setting the
extension does not know is reported unavailable before any question is asked.
"""

ARMS = {
    # name:            (settings,                                 audit)
    "grid":            ({},                                       {"ablation": None}),
    "grid-no-repair":  ({"grid.ablation": "no_repair"},           {"ablation": "no_repair", "repair_of": None}),
    "unconstrained":   ({"grid.ablation": "unconstrained"},       {"ablation": "unconstrained"}),
    # The judge off (grid.judge, superuser-only): statements are returned unplanned. Its
    # generations carry grid.generations.verdict = '{"verdict":"off"}' (NULL for one the
    # checker refused, or one that wrote no statement), which an equality check cannot
    # require of every row; the "grid" arm's carry "pass" or "fail".
    "grid-no-judge":   ({"grid.judge": "off"},                    {"ablation": None}),
}

DEFAULT = ["grid", "grid-no-repair", "unconstrained"]

# The arm the others are paired against (questions fixed and broken), when it runs.
BASELINE = "unconstrained"


def settings(arm):
    return ARMS[arm][0]


def audit(arm):
    return ARMS[arm][1]


def all_settings(arms):
    """Every setting any of `arms` sets: each is reset before an arm applies its own."""
    return sorted({name for a in arms for name in settings(a)})


def mismatches(arm, generation_rows):
    """What in `generation_rows` (dicts of grid.generations columns) contradicts `arm`:
    a list of "generation G: column = value, expected value" strings."""
    out = []
    for row in generation_rows:
        for column, want in audit(arm).items():
            got = row.get(column)
            if got != want:
                out.append(f"generation {row.get('generation')}: {column} = {got!r}, expected {want!r}")
    return out
