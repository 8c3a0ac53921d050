"""The arms of an evaluation: what a superuser session sets before it takes the asking
role (SET ROLE), and what every generation of the arm must show in grid.generations, so
that a run proves each arm ran as asked.

One entry per arm; adding an arm (issue 22's examples, issue 20's judge off) is one line.
`settings` are session settings (name -> value), applied with set_config before SET ROLE
and reset before the next arm; `audit` maps a column of grid.generations to what every
generation of the arm must hold in it: a value, or a set of the values allowed (a column
the table does not have reads as NULL), checked on the rows each ask wrote. A key of
`PROMPT_KEYS` is no column: it is read from the generation's prompt artifact
(grid.artifacts, kind 'prompt', the generation's prompt_digest), true when the artifact's
document holds that key with the value true.

The levers are the extension's superuser-only settings `grid.ablation` (none, no_repair,
prompt_repair, unconstrained), `grid.judge` (on, off), `grid.decline` (off, on),
`grid.value_hints` (0 to 100) and `grid.examples`
(0 to 20, 3 by default; an arm that sets it above 0 asks with leave-one-out examples:
uses_examples; the others set it to 0, so "grid" is the plain configuration). The seal tells the unconstrained arm apart by its decode mode
('unconstrained' instead of 'mode1'/'mode2'); an arm without repair shows no generation
that repairs another (repair_of is NULL). An arm whose setting the extension does not know
is reported unavailable before any question is asked.
"""

MASKED = {"mode1", "mode2"}

# grid.examples is on by default (k = 3) and the harness's store holds the pairs of the
# last examples arm's ask, so every arm that is not about examples turns it off.
NO_EXAMPLES = {"grid.examples": "0"}

# Audit keys read from the prompt artifact instead of grid.generations: key -> the key of
# the artifact's document (absent when false; grid_ask::contents::PromptRecord).
PROMPT_KEYS = {"prompt_decline": "decline"}

ARMS = {
    # name:            (settings,                                                  audit)
    "grid":            ({**NO_EXAMPLES},                                           {"decode_mode": MASKED}),
    "grid-no-repair":  ({**NO_EXAMPLES, "grid.ablation": "no_repair"},            {"decode_mode": MASKED, "repair_of": None}),
    # Repair by asking again with the reasons only, never by rewinding the statement to
    # the reference the checker refused (what the rewind brings; issue 19).
    "grid-prompt-repair": ({**NO_EXAMPLES, "grid.ablation": "prompt_repair"},     {"decode_mode": MASKED}),
    "unconstrained":   ({**NO_EXAMPLES, "grid.ablation": "unconstrained"},        {"decode_mode": "unconstrained", "repair_of": None}),
    # The judge off (grid.judge, superuser-only): statements are returned unplanned. Its
    # generations carry grid.generations.verdict '{"verdict":"off"}', or NULL for one the
    # checker refused or one that wrote no statement; the "grid" arm's carry "pass" or
    # "fail" (with PostgreSQL's SQLSTATE).
    "grid-no-judge":   ({**NO_EXAMPLES, "grid.judge": "off"},                     {"decode_mode": MASKED,
                                                                                    "verdict": {'{"verdict":"off"}', None}}),
    # Value hints (issue 22): up to 10 values of each text column the role reads (the
    # harness opts every text column in, grid.show_values), beside the column in the
    # prompt (grid.value_hints, superuser-only).
    "grid+values":     ({**NO_EXAMPLES, "grid.value_hints": "10"},                {"decode_mode": MASKED}),
    # The decline taught (issue 33, grid.decline, superuser-only): the prompt tells the
    # model it may answer `CANNOT ANSWER 'reason'` (grid.ask then fails with P0002, classed
    # "declined"). Every generation's prompt artifact must say it taught it ("decline":
    # true). On Spider's answerable questions its declines are false declines; with
    # run.py --withhold gold-tables, declines are what the question should get.
    "grid+decline":    ({**NO_EXAMPLES, "grid.decline": "on"},                    {"decode_mode": MASKED,
                                                                                    "prompt_decline": True}),
    # Curated examples (issue 22): up to 3 question/SQL pairs in the prompt (grid.examples,
    # superuser-only). Spider has none: before each ask of this arm the harness stores, as
    # the superuser, the pairs of the OTHER questions of the question's database
    # (leave-one-out; run.py's load_examples), and checks that the prompt showed none of
    # the question under test (examples_shown in the record).
    "grid+examples":   ({"grid.examples": "3"},                                    {"decode_mode": MASKED}),
    # The unconstrained model shown the same examples: whether the mask still adds anything
    # once the prompt holds curated pairs.
    "unconstrained+examples": ({"grid.examples": "3", "grid.ablation": "unconstrained"},
                               {"decode_mode": "unconstrained", "repair_of": None}),
    # Every anchor lever at once (issue 22's "grid+all"): the two arms above together.
    "grid+all":        ({"grid.examples": "3", "grid.value_hints": "10"},          {"decode_mode": MASKED}),
}

DEFAULT = ["grid", "grid-no-repair", "unconstrained"]

# The arm the others are paired against (questions fixed and broken), when it runs.
BASELINE = "unconstrained"


def settings(arm):
    return ARMS[arm][0]


def audit(arm):
    return ARMS[arm][1]


def uses_examples(arm):
    """Whether `arm` shows curated examples, so that the harness stores them first."""
    return int(settings(arm).get("grid.examples", "0")) > 0


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
            if isinstance(want, (set, frozenset)):
                if got not in want:
                    out.append(f"generation {row.get('generation')}: {column} = {got!r}, "
                               f"expected one of {sorted(want, key=repr)!r}")
            elif got != want:
                out.append(f"generation {row.get('generation')}: {column} = {got!r}, expected {want!r}")
    return out
