"""Per-cell figures derived from a loaded cell, shared by the HTML and Markdown.

Everything is driven by the cell's own "groups", "schema", "runs" and
"checks": the group list says which tensors were compared, the schema says
which child optimizer owns each state key, any run that carries a "diff" is
a compared run, and each check's "on" says which groups it judges
(group_coverage). No state key is named here.

An external system's cell (Cell.external) also compares its distributed
runs with the system's own single-device run ("diff_single_device");
single_device_view() shapes those comparisons like a result, so the group
table and the |diff| plot take them as they take the cell. A cell declared
expected to fail (xfail, xpass) says why and what it got (expectation()).

A tolerance check is shown by the figure that decided it against its bound
(judgement(): "max rel 3.1e-4 ≤ 1e-3"), from its "judged_by" or, in older
results, from its atol/rtol/max_abs/max_rel. Raw figures are shown only
where a check uses them (figures_used()): relative error for a tolerance
check, ULP distances for a check with a max_ulp, the number of differing
elements for a bitwise check.
"""
import dataclasses
import math
import re
from typing import Dict, List, Optional, Tuple

from load import Cell

MODEL_GROUPS = ("params", "main_params")
# The run an external system's distributed runs are also compared with (checks' "against").
SINGLE_DEVICE = "single_device"


@dataclasses.dataclass
class SeriesMax:
    """The largest finite value of one per-step series, and its step."""
    value: Optional[float]
    step: Optional[int]
    all_zero: bool          # every non-null entry is exactly 0
    nonzero_steps: int


def series_max(steps: List[int], values: Optional[List]) -> SeriesMax:
    if not values:
        return SeriesMax(None, None, False, 0)
    best, best_step, nonzero, seen = None, None, 0, 0
    for s, v in zip(steps, values):
        if v is None or not math.isfinite(v):
            continue
        seen += 1
        if v != 0:
            nonzero += 1
        if best is None or v > best:
            best, best_step = v, s
    return SeriesMax(best, best_step, seen > 0 and nonzero == 0, nonzero)


@dataclasses.dataclass
class GroupStats:
    """Max differences of one tensor group in one compared run."""
    run: str
    group: str
    owner: str              # "model" or the child kinds whose schema holds the key
    max_abs: SeriesMax
    max_rel: SeriesMax
    max_ulp: SeriesMax      # between same-sign values only (sign changes have no ULP distance)
    mismatch_steps: int     # steps with a nonzero mismatch count
    sign_changes: SeriesMax  # differing pairs of opposite sign per step (all zero in older results)
    mismatches: SeriesMax   # the most elements whose bytes differ at one step, and that step


def diff_runs(result: Optional[dict]) -> List[str]:
    """Names of the runs that carry a diff, in file order."""
    if not result:
        return []
    return [name for name, run in result["runs"].items() if run.get("diff")]


def owners(schema: Dict[str, List[str]]) -> Dict[str, str]:
    """State key -> "kind1, kind2" of the child optimizers whose schema has it."""
    out: Dict[str, List[str]] = {}
    for kind, keys in schema.items():
        for key in keys:
            out.setdefault(key, []).append(kind)
    return {k: ", ".join(v) for k, v in out.items()}


def state_groups(result: dict) -> List[str]:
    """The groups that are optimizer state (listed by some child's schema)."""
    keys = owners(result["schema"])
    return [g for g in result["groups"] if g in keys]


def group_stats(result: Optional[dict]) -> List[GroupStats]:
    """One GroupStats per (compared run, group), groups in the cell's order."""
    if not result:
        return []
    own = owners(result["schema"])
    out = []
    for name in diff_runs(result):
        run = result["runs"][name]
        steps = run["steps"]
        for group in result["groups"]:
            series = run["diff"][group]
            mism = series.get("mismatches") or []
            out.append(GroupStats(
                run=name, group=group,
                owner="model" if group in MODEL_GROUPS else own.get(group, "?"),
                max_abs=series_max(steps, series.get("max_abs")),
                max_rel=series_max(steps, series.get("max_rel")),
                max_ulp=series_max(steps, series.get("max_ulp")),
                mismatch_steps=sum(1 for m in mism if m),
                sign_changes=series_max(steps, series.get("sign_changes")),
                mismatches=series_max(steps, series.get("mismatches"))))
    return out


def sign_change_note(sign_changes: SeriesMax) -> Optional[str]:
    """Why a group's max ULP leaves some elements out, or None when no
    differing pair changed sign: ULP distances are only given between values
    of the same sign, so opposite-sign pairs are counted apart."""
    count = sign_changes.value
    if not count:
        return None
    noun = "element" if count == 1 else "elements"
    if sign_changes.nonzero_steps == 1:
        return f"ULP n/a for {count:g} sign-changing {noun} (step {sign_changes.step})"
    return f"ULP n/a for up to {count:g} sign-changing {noun} per step ({sign_changes.nonzero_steps} steps)"


def rel_label(result: Optional[dict]) -> str:
    """What a cell's max_rel is relative to: "vs max(|b|, 1e-05)" when
    result.json states its "rel_floor", else "" (older results)."""
    floor = (result or {}).get("rel_floor")
    return "" if floor is None else f"vs max(|b|, {floor:g})"


def zero_series(result: Optional[dict]) -> List[str]:
    """"run/group" of every diff series whose max_abs is exactly 0 at every step."""
    return [f"{g.run}/{g.group}" for g in group_stats(result) if g.max_abs.all_zero]


# Two lr values closer than this (relative) count as the same: a constant schedule.
LR_REL_TOL = 1e-9


@dataclasses.dataclass
class LrSchedule:
    """The learning rate of the main child optimizer over a cell's runs
    (each run's per-step "lr" series, after the schedule is applied)."""
    runs: List[str]         # runs with at least one lr value, in file order
    low: float
    high: float

    @property
    def constant(self) -> bool:
        """Every lr value of every run is the same."""
        return math.isclose(self.low, self.high, rel_tol=LR_REL_TOL, abs_tol=0.0)


def lr_schedule(result: Optional[dict]) -> Optional[LrSchedule]:
    """The cell's lr, or None when no run has an lr series (older results)."""
    if not result:
        return None
    runs, values = [], []
    for name, run in result.get("runs", {}).items():
        vals = [v for v in run.get("lr") or [] if v is not None]
        if vals:
            runs.append(name)
            values += vals
    if not values:
        return None
    return LrSchedule(runs, min(values), max(values))


def has_loss(result: Optional[dict]) -> bool:
    """Whether some run has a loss value (oracle models have none)."""
    return bool(result) and any(run.get("loss") and any(v is not None for v in run["loss"])
                                for run in result["runs"].values())


def clipped_steps(result: dict, max_norm: float) -> Optional[Tuple[int, int]]:
    """(steps that clipped, steps) of the reference run (else the first run
    with a grad norm): a step clips when norm + 1e-6 > max_norm
    (docs/optimizers.md, "Gradient clipping"). None without grad norms."""
    runs = result.get("runs") or {}
    for name in ["reference"] + [n for n in runs if n != "reference"]:
        norms = [v for v in (runs.get(name) or {}).get("grad_norm") or [] if v is not None]
        if norms:
            return sum(1 for v in norms if v + 1e-6 > max_norm), len(norms)
    return None


def clipping_label(result: dict, max_norm: float) -> str:
    """"1.0 (clipped 7 of 12 steps)", or the bound alone without grad norms."""
    counted = clipped_steps(result, max_norm)
    if counted is None:
        return f"{max_norm:g}"
    return f"{max_norm:g} (clipped {counted[0]} of {counted[1]} steps)"


def has_grad_norm(result: Optional[dict]) -> bool:
    """Whether some run has a grad-norm value (oracle models have them too)."""
    return bool(result) and any(any(v is not None for v in run.get("grad_norm") or [])
                                for run in result["runs"].values())


def plot_priority(result: Optional[dict]) -> int:
    """How much the cell has to draw: 2 for a loss, an lr that is not
    constant, or a nonzero difference; 1 for a grad norm alone; 0 for
    nothing."""
    if not result:
        return 0
    lr = lr_schedule(result)
    if has_loss(result) or (lr is not None and not lr.constant) or \
            any(g.max_abs.nonzero_steps or g.max_rel.nonzero_steps for g in group_stats(result)):
        return 2
    return 1 if has_grad_norm(result) else 0


def overall_max_abs(result: Optional[dict]) -> Dict[str, Optional[float]]:
    """"run/group" -> the largest max_abs over all steps (for baseline comparison)."""
    return {f"{g.run}/{g.group}": g.max_abs.value for g in group_stats(result)}


def first_failure(cell: Cell) -> Optional[dict]:
    """Where the cell first broke: {check, step, tensor, detail}, or None.

    Taken from result.json's first_failure, else results.json's, else the
    first failing check, else (error cells) the error message."""
    r = cell.result
    if r and r.get("first_failure"):
        return r["first_failure"]
    if cell.entry.get("first_failure"):
        return cell.entry["first_failure"]
    if r:
        if r.get("skipped"):
            return {"check": None, "step": None, "tensor": None, "detail": "skipped: " + skip_reason(cell)}
        for check in r.get("checks", []):
            if check["verdict"] == "fail":
                return {"check": check["name"], "step": check.get("first_failing_step"),
                        "tensor": check.get("first_failing_tensor"), "detail": check.get("detail")}
        if r.get("error"):
            return {"check": None, "step": None, "tensor": None, "detail": r["error"]}
    return None


def skip_reason(cell: Cell) -> str:
    """Why a skipped cell was not run: result.json's "skipped", else the
    results.json entry's, else its first failure's detail; "no reason
    given" only when none of them says."""
    for source in (cell.result or {}, cell.entry):
        if source.get("skipped"):
            return source["skipped"]
    ff = cell.entry.get("first_failure") or {}
    return ff.get("detail") or "no reason given"


def failing_checks(result: Optional[dict]) -> List[dict]:
    return [c for c in (result or {}).get("checks", []) if c["verdict"] == "fail"]


def check_groups(result: dict, check: dict) -> List[str]:
    """The tensor groups a check compares: `on` "state" means every state
    group, "loss" none, any other value the group of that name. A check
    without `on` is taken as a state check."""
    on = check.get("on") or "state"
    if on == "state":
        return state_groups(result)
    return [g for g in result["groups"] if g == on]


def group_coverage(result: Optional[dict]) -> Dict[str, List[dict]]:
    """Group -> the checks that apply to it (verdict "pass" or "fail"; an
    "n/a" check covers nothing), for every group of the cell, in its order.
    A group with an empty list is not checked."""
    if not result:
        return {}
    out: Dict[str, List[dict]] = {g: [] for g in result["groups"]}
    for check in result.get("checks", []):
        if check["verdict"] == "n/a":
            continue
        for group in check_groups(result, check):
            out[group].append(check)
    return out


def group_verdict(checks: List[dict]) -> str:
    """"fail" when one of a group's checks failed, "pass" when all passed,
    "unchecked" when none applies."""
    if not checks:
        return "unchecked"
    return "fail" if any(c["verdict"] == "fail" for c in checks) else "pass"


def check_runs(check: dict, runs: List[str]) -> List[str]:
    """Which of the compared `runs` a check speaks for: the runs its `run`
    names ("uninterrupted+resumed"; a failed check names the run it failed
    in), or all of them when it names none of them (e.g. "reference")."""
    named = [r for r in (check.get("run") or "").split("+") if r in runs]
    return named or list(runs)


def unchecked_reason(result: dict, group: str) -> str:
    """One short line on why no check covers `group` of the cell."""
    applied = [c for c in result.get("checks", []) if c["verdict"] != "n/a"]
    not_applicable = [c["name"] for c in result.get("checks", [])
                      if c["verdict"] == "n/a" and group in check_groups(result, c)]
    if applied and all(c.get("on") == "loss" for c in applied):
        reason = "only the loss is checked in this cell"
    elif applied:
        covered = sorted({c.get("on") or "state" for c in applied})
        reason = "the checks compare " + ", ".join(covered) + " only"
    else:
        reason = "the cell has no check that applies"
    if not_applicable:
        reason += "; n/a here: " + ", ".join(not_applicable)
    return reason


# Figures of a group's comparison that a check may use (figures_used).
FIGURES = ("abs", "rel", "ulp", "elements")


def uses_rel(check: dict) -> bool:
    """Whether a check judges relative error: a tolerance check, or any other
    with an rtol (a loss continuity check); a bitwise check does not."""
    return check.get("kind") == "tolerance" or (check.get("kind") != "bitwise" and bool(check.get("rtol")))


def uses_ulp(check: dict) -> bool:
    """Whether a check judges ULP distances: one with a max_ulp, other than a
    bitwise check (whose bound is every byte equal)."""
    return check.get("max_ulp") is not None and check.get("kind") != "bitwise"


def figures_used(checks: List[dict]) -> List[str]:
    """Which of FIGURES the checks covering a group use, in that order: max
    abs always; relative error for a tolerance check; ULP distances for a
    check with a max_ulp; the number of differing elements for a bitwise
    check, or for a group no check covers. A check of another kind (which
    the report does not know) shows them all."""
    used = {"abs"}
    if not checks:
        used.add("elements")
    for c in checks:
        kind = c.get("kind")
        if kind == "bitwise":
            used.add("elements")
        elif kind != "tolerance":
            used.update(FIGURES)
        if uses_rel(c):
            used.add("rel")
        if uses_ulp(c):
            used.add("ulp")
    return [f for f in FIGURES if f in used]


def fmt_figure(v) -> str:
    """A figure or bound, short: "3.1e-4", "1e-3", "0.25", "7.32e3", "12"."""
    if v is None:
        return "—"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e6):
        return str(int(v))
    if 1e-2 <= abs(v) < 1e3:
        return f"{v:.3g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


# What each "judged_by" figure is called, and what bounds it.
JUDGED_LABEL = {"max_abs": "max abs", "max_rel": "max rel", "violations": "violations"}
ELEMENTWISE = "atol + rtol·|b|"


@dataclasses.dataclass
class Judgement:
    """What decided a tolerance (or loss continuity) check: one figure against its bound."""
    figure: str                 # "max_abs" | "max_rel" | "violations"; "elementwise" when neither
    value: Optional[float]      #   max_abs ≤ atol nor max_rel ≤ rtol agrees with the verdict
    bound: Optional[float]
    within: bool                # the figure is within its bound (the check passed by it)
    derived: bool               # worked out from atol/rtol/max_abs/max_rel: no "judged_by"

    @property
    def text(self) -> str:
        """ "max rel 3.1e-4 ≤ 1e-3"; "violations 0 ≤ 0 (elements beyond atol + rtol·|b|)"."""
        if self.figure == "elementwise":
            return f"every element within {ELEMENTWISE}" if self.within else f"elements beyond {ELEMENTWISE}"
        op = "≤" if self.within else ">"
        text = f"{JUDGED_LABEL[self.figure]} {fmt_figure(self.value)} {op} {fmt_figure(self.bound)}"
        return text + (f" (elements beyond {ELEMENTWISE})" if self.figure == "violations" else "")


def judgement(check: dict) -> Optional[Judgement]:
    """The figure that decided a check, against its bound: its "judged_by"
    when present (tolerance and loss continuity checks); else, for a
    tolerance check, max_abs ≤ atol when that holds, else max_rel against
    rtol; "elementwise" when that figure disagrees with the verdict (each
    element is judged by |a - b| ≤ atol + rtol·|b|, so both maxima may
    exceed their halves of the bound at different elements). None for a
    bitwise check, an "n/a" one, or one without the figures."""
    if check.get("verdict") not in ("pass", "fail"):
        return None
    judged = check.get("judged_by")
    if judged:
        return Judgement(judged["figure"], judged["value"], judged["bound"],
                         judged["value"] <= judged["bound"], derived=False)
    if check.get("kind") != "tolerance":
        return None
    atol, rtol, max_abs, max_rel = (check.get(k) for k in ("atol", "rtol", "max_abs", "max_rel"))
    if max_abs is not None and atol is not None and max_abs <= atol:
        figure, value, bound = "max_abs", max_abs, atol
    elif max_rel is not None and rtol is not None:
        figure, value, bound = "max_rel", max_rel, rtol
    else:
        return None
    passed = check["verdict"] == "pass"
    if (value <= bound) != passed:
        return Judgement("elementwise", None, None, passed, derived=True)
    return Judgement(figure, value, bound, passed, derived=True)


# Citations of a specification file the repository does not have, as check
# text (e.g. a routing check's "against") may still carry them, and the docs
# page that holds each fact.
CITATIONS = {"SEMANTICS.md routing rule": "docs/optimizers.md routing rule"}


def cite_docs(text: Optional[str]) -> Optional[str]:
    """`text` with each known citation of SEMANTICS.md replaced by the
    repository's docs page that holds the fact (CITATIONS)."""
    if not text:
        return text
    for old, new in CITATIONS.items():
        text = text.replace(old, new)
    return text


@dataclasses.dataclass
class ToleranceLine:
    """One atol/rtol pair of the cell's tolerance checks, drawn on the |diff| plot."""
    atol: Optional[float]
    rtol: Optional[float]
    targets: List[str]      # "run/on" of every check with these bounds
    groups: List[str]       # the tensor groups those checks cover


def tolerance_lines(result: Optional[dict]) -> List[ToleranceLine]:
    """The atol/rtol bounds of the cell's tolerance checks (loss checks left
    out), one line per distinct pair, naming the checks that use it."""
    if not result:
        return []
    lines: Dict[tuple, ToleranceLine] = {}
    for check in result["checks"]:
        on = check.get("on") or "state"
        if check["kind"] != "tolerance" or on == "loss":
            continue
        groups = check_groups(result, check)
        line = lines.setdefault((check.get("atol"), check.get("rtol")),
                                ToleranceLine(check.get("atol"), check.get("rtol"), [], []))
        target = f"{check.get('run') or '?'}/{on}"
        if target not in line.targets:
            line.targets.append(target)
        line.groups += [g for g in groups if g not in line.groups]
    return list(lines.values())


@dataclasses.dataclass
class Expectation:
    """Why a cell was declared expected to fail, and what it got."""
    reason: str             # "docs/findings.md#<anchor> ..." by convention
    got: Optional[str]      # "fail" | "error" | "pass"; None when only config.expect says it
    failing_check: Optional[str] = None     # the check expected to fail first, when named

    @property
    def got_text(self) -> str:
        """What the cell got, for people."""
        return GOT_TEXT.get(self.got, self.got or "unknown")

    @property
    def ref(self) -> Optional[str]:
        """The leading "docs/<page>.md#<anchor>" of the reason, or None."""
        m = REASON_REF.match(self.reason)
        return m.group(1) if m else None

    @property
    def text(self) -> str:
        """The reason without its leading reference."""
        m = REASON_REF.match(self.reason)
        return (m.group(2) if m else self.reason).strip(" -—:")


GOT_TEXT = {"fail": "failed", "error": "errored", "pass": "passed every check"}
REASON_REF = re.compile(r"^(\S+\.md(?:#\S*)?)(.*)$", re.S)


def expectation(cell: Cell) -> Optional[Expectation]:
    """The cell's expected failure: result.json's "expected", else
    config.expect (an xfail or xpass without either, e.g. one that left no
    result.json, gives no reason); None for a cell not declared expected to
    fail."""
    r = cell.result or {}
    exp = r.get("expected") or (r.get("config") or {}).get("expect")
    if not exp:
        return Expectation("no reason given", None) if cell.verdict in ("xfail", "xpass") else None
    return Expectation(exp.get("reason") or "no reason given", exp.get("got"), exp.get("failing_check"))


def system_versions(result: Optional[dict]) -> List[Tuple[str, str]]:
    """(package, version) pairs the external system's adapter reported."""
    system = ((result or {}).get("environment") or {}).get("system") or {}
    return list((system.get("versions") or {}).items())


def adapter_error_line(error: Optional[dict]) -> Optional[str]:
    """One line on an adapter run's error: "rank 1, load at step 4:
    RuntimeError: message (file:line)", or None without one."""
    if not error:
        return None
    where = ", ".join(p for p in (f"rank {error['rank']}" if error.get("rank") is not None else "",
                                  error.get("phase") or "") if p)
    if error.get("step") is not None:
        where += f" at step {error['step']}"
    line = f"{error.get('type') or 'error'}: {error.get('message') or ''}".strip()
    if error.get("where"):
        line += f" ({error['where']})"
    return f"{where}: {line}" if where else line


def single_device_view(result: Optional[dict]) -> Optional[dict]:
    """The distributed runs against the system's single-device run, shaped
    like a result: groups params, main_params when the system keeps them,
    and the cell's system_state_keys (state keys owned by the system), the runs that have a
    diff_single_device (as their "diff") and the checks against the
    single-device run. None for a cell without such runs."""
    if not result:
        return None
    runs = {name: dict(run, diff=run["diff_single_device"]) for name, run in result.get("runs", {}).items()
            if run.get("diff_single_device")}
    if not runs:
        return None
    keys = [k for k in result.get("system_state_keys") or [] if k not in MODEL_GROUPS]
    model = [g for g in MODEL_GROUPS if all(g in run["diff"] for run in runs.values())]
    system = (result.get("config") or {}).get("system") or "system"
    return {"groups": model + keys, "schema": {system: keys} if keys else {},
            "runs": runs, "config": result.get("config") or {},
            "checks": [c for c in result.get("checks", []) if c.get("against") == SINGLE_DEVICE]}


def reference_view(result: Optional[dict]) -> Optional[dict]:
    """The result with only the checks that judge its "diff" (against the
    reference, or the uninterrupted run), for its group table and |diff|
    plot: the checks against an external system's single-device run judge
    diff_single_device instead (single_device_view). The result itself when
    it has none of those. What a cell left unchecked (answers.py) counts
    every check."""
    if not result or not any(c.get("against") == SINGLE_DEVICE for c in result.get("checks", [])):
        return result
    return dict(result, checks=[c for c in result["checks"] if c.get("against") != SINGLE_DEVICE])


def resume_label(cell: Cell) -> str:
    """The matrix column of a cell: "dp2", or "dp2→dp3" with a resume plan."""
    dp, rdp = cell.get("dp"), cell.get("resume_dp")
    return f"dp{dp}" if rdp is None else f"dp{dp}→dp{rdp}"


def config_line(cell: Cell) -> List[tuple]:
    """(label, value) pairs describing the cell's configuration."""
    r = cell.result or {}
    cfg = r.get("config", {})
    sc = r.get("scenario", {})
    pairs = [("system", cell.system if cell.external else None),
             ("optimizer", cell.get("optimizer")), ("sharding type", cell.get("sharding_type")),
             ("dp", cell.get("dp"))]
    if cell.get("resume_dp") is not None:
        pairs += [("save at step", cell.get("save_at")), ("resume dp", cell.get("resume_dp"))]
    pairs += [("dtype", cell.get("dtype", cfg.get("dtype"))), ("model", cell.get("model", cfg.get("model"))),
              ("steps", cell.get("steps", cfg.get("steps"))), ("seed", cfg.get("seed")),
              ("micro batches", cfg.get("micro_batches")), ("bucket size", cfg.get("bucket_size")),
              ("backend", cfg.get("backend"))]
    opt = cfg.get("optimizer") or {}
    if opt.get("max_grad_norm"):
        pairs.append(("max grad norm", clipping_label(r, opt["max_grad_norm"])))
    lr = lr_schedule(r)
    if lr is not None:      # a constant lr is only said here; a scheduled one is also drawn
        pairs.append(("lr", f"{lr.low:g}" if lr.constant else f"scheduled, {lr.low:g} to {lr.high:g}"))
    if sc.get("file"):
        pairs.append(("scenario", f"{sc.get('name', '')} {sc['file']}:{sc.get('line', '?')}".strip()))
    elif cell.get("scenario"):
        pairs.append(("scenario", cell.get("scenario")))
    if cell.get("wall_s") is not None:
        pairs.append(("wall", f"{cell.get('wall_s'):.1f} s"))
    return [(k, v) for k, v in pairs if v is not None]
