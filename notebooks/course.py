"""The course's exercise checker: one module for every lesson (issue 11 item 3).

In a lesson, the student's cell holds a `...` stub; the cell after it checks the answer:

    from course import check
    my_scores = ...                       # your code here
    check("04.1", my_scores, tr=tr)       # "✅ correct (04.1): ..." or "❌ not yet (04.1): ... hint: ..."

`check` never raises for a wrong answer (a committed lesson with its stubs runs cleanly under
nbval) unless the environment sets BERTVIZ_COURSE_STRICT=1: then a failed check raises
AssertionError (tests/test_lessons.py runs every lesson with its solutions under strict mode).

The exercises live in notebooks/exercises/exNN.py, one module per lesson, each registering
checkers with `@exercise(id, hint=...)`. A checker takes the answer and the keyword context the
lesson passes (`tr=tr`, `actual=...`) and returns `(ok, detail)`; the helpers `close`, `equals`,
`one_of` and `within` build that pair. This module imports numpy only (the exercise modules
import bertviz_lite where they need it); it holds no copy of package code.
"""
from __future__ import annotations

import importlib
import inspect
import os
import reprlib
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
STRICT_ENV = "BERTVIZ_COURSE_STRICT"
STUB = "replace the ... with your answer"

__all__ = ["check", "checker", "exercise", "close", "equals", "one_of", "within", "sequence", "calls", "wrong_answers",
           "named_mistakes", "left_out_mistakes", "picture", "try_it", "formula", "forward_pass", "flow_picture",
           "symbol_table", "model_config", "vectors_picture"]
MAX_MESSAGE = 400  # characters of a verdict: a 10 MB answer is never echoed into the cell


@dataclass
class Exercise:
    id: str
    fn: Callable[..., Any]
    hints: tuple[str, ...]  # graded: the idea first, then a partial step; never the solution line
    wrong: Callable[..., list] | None = None  # (answer, **context) -> answers the checker must reject
    prediction: bool = False  # a "predict first" exercise: its answer must not be printed above the stub
    # (**context) -> {the sentence that names a mistake: an answer making it}
    mistakes: Callable[..., dict] | None = None
    open_ended: bool = False  # many answers are right (a word of your own, a head you found): fewer mistakes to name

    @property
    def hint(self) -> str:
        return self.hints[0]


@dataclass
class Call:
    """One `check` call, kept so that a test can replay it with wrong answers."""
    id: str
    answer: Any
    context: dict = field(default_factory=dict)
    ok: bool = False


_EXERCISES: dict[str, Exercise] = {}
_CALLS: dict[str, Call] = {}  # the last call of each exercise: what the replay needs, bounded by the exercises
_TRIES: dict[str, int] = {}  # wrong answers so far, per exercise: which hint comes next


# ------------------------------------------------------------------------------------------
# registering exercises (used by notebooks/exercises/exNN.py)
# ------------------------------------------------------------------------------------------


def exercise(id: str, *, hint: str | tuple[str, ...] | list[str], wrong: Callable[..., list] | None = None,
             prediction: bool = False, mistakes: Callable[..., dict] | None = None, open_ended: bool = False):
    """Register the checker of exercise `id` ("04.1"). `hint` is shown when an answer is not yet
    right: one string, or graded hints (a tuple), the first after the first wrong try (the idea:
    which formula line, what the shapes must be), the next after the next (a partial step). A hint
    never holds the solution's code line (tests/test_lessons.py checks it against notebooks/solutions/).
    `wrong(answer, **context)`, if given, returns answers the checker must reject (the test
    of the course replays every check with them; by default it perturbs the right answer).
    `prediction=True` marks a "predict first" exercise: no number printed above its stub may pass it.
    `mistakes(**context)` returns the mistakes the lesson discusses, {sentence: an answer that makes it}
    ("you divided by sqrt(H): the scores use sqrt(d_k)": Q @ K.T / sqrt(H)). A wrong answer equal to one of
    them (numbers within a tolerance) is answered with its sentence; a checker may also recognise a mistake
    itself (a function answer) and return the sentence. tests/test_lessons.py holds every sentence to the
    answer that makes it, and asks every write exercise that is not `open_ended` for at least three."""
    _split(id)
    hints = (hint,) if isinstance(hint, str) else tuple(hint)
    if not hints or not all(isinstance(h, str) and h.strip() for h in hints):
        raise ValueError(f"exercise {id}: hint is a non-empty string or a tuple of them, got {hint!r}")

    def register(fn):
        _EXERCISES[id] = Exercise(id, fn, hints, wrong, prediction, mistakes, open_ended)
        return fn

    return register


def _split(id: str) -> str:
    lesson, _, number = str(id).partition(".")
    if not (len(lesson) == 2 and lesson.isdigit() and number):
        raise ValueError(f"an exercise id is 'NN.k' (lesson number, dot, exercise), like '04.1'; got {id!r}")
    return lesson


def _lookup(id: str) -> Exercise:
    lesson = _split(id)
    if id not in _EXERCISES:
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        try:
            importlib.import_module(f"exercises.ex{lesson}")
        except ModuleNotFoundError as e:
            raise KeyError(f"no exercises for lesson {lesson}: notebooks/exercises/ex{lesson}.py "
                           f"is missing ({e})") from None
    if id not in _EXERCISES:
        known = sorted(k for k in _EXERCISES if k.startswith(lesson + "."))
        raise KeyError(f"no exercise {id!r}; lesson {lesson} has {known}")
    return _EXERCISES[id]


def checker(id: str) -> Callable[..., tuple[bool, str]]:
    """The checker of exercise `id` as a function `(answer, **context) -> (ok, detail)`; prints nothing."""
    ex = _lookup(id)

    def run(answer, **context) -> tuple[bool, str]:
        try:  # the call itself (the lesson's context= names) is the course's to get right, not the student's
            params = inspect.signature(ex.fn).bind(answer, **context).signature.parameters
        except TypeError as e:
            raise TypeError(f"check({id!r}, ...) is called with the wrong context ({e}); this is a mistake in the "
                            "lesson cell or the checker, not in your answer") from None
        unset = [k for k, v in context.items() if (v is None or v is Ellipsis) and
                 (k not in params or params[k].default is not v)]  # (a checker may take weights=None)
        if unset:  # L6: a context the lesson did not set (tr=None) was reported to the student as "not yet"
            raise TypeError(f"check({id!r}, ...) is called with {unset[0]}={context[unset[0]]!r}; the lesson cell "
                            "must pass its value (re-run the cells above): this is not a mistake in your answer")
        if answer is Ellipsis:
            return False, STUB
        try:  # a checker's arithmetic on a wrong answer (inf - inf, 0 / 0) warns nothing into the cell
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                result = ex.fn(answer, **context)
        except AttributeError as e:
            culprit = [k for k, v in context.items() if getattr(e, "obj", answer) is v and v is not answer]
            if culprit:  # the context, not the answer, lacks what the checker reads (L6)
                raise TypeError(f"check({id!r}, ...) is called with {culprit[0]}= a {type(e.obj).__name__}, "
                                f"which has no {e.name!r}; this is a mistake in the lesson cell or the checker, "
                                "not in your answer") from None
            return False, _cut(f"checking your answer raised {type(e).__name__}: {e}")
        except Exception as e:  # a malformed answer: tell the student what broke, do not crash the lesson
            return False, _cut(f"checking your answer raised {type(e).__name__}: {e}")
        ok, detail = result if isinstance(result, tuple) else (bool(result), "")
        if not ok and ex.mistakes is not None:  # a mistake the lesson discusses: say which one
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    named = ex.mistakes(**context)
            except Exception:  # naming the mistake is a courtesy; the verdict stands without it
                named = {}
            for sentence, value in named.items():
                if _same(answer, value):
                    return False, _cut(sentence)
        return bool(ok), _cut(str(detail))

    return run


def check(id: str, answer, **context) -> bool:
    """Check the student's answer to exercise `id`; print the verdict and return True or False.
    Under BERTVIZ_COURSE_STRICT=1 a failed check raises AssertionError."""
    ex = _lookup(id)
    ok, detail = checker(id)(answer, **context)
    _CALLS.pop(id, None)
    _CALLS[id] = Call(id, answer, dict(context), ok)
    if ok:
        print(f"✅ correct ({id})" + (f": {detail}" if detail else ""))
        return True
    message = f"❌ not yet ({id}): {detail}" if detail else f"❌ not yet ({id})"
    if detail != STUB:
        tries = _TRIES[id] = _TRIES.get(id, 0) + 1
        k = min(tries, len(ex.hints))
        label = "hint" if len(ex.hints) == 1 else f"hint {k} of {len(ex.hints)}"
        message += f"\n   {label}: {ex.hints[k - 1]}"
        if k < len(ex.hints):
            message += "\n   (another wrong try shows the next hint)"
    print(message)
    if os.environ.get(STRICT_ENV, "") not in ("", "0"):
        raise AssertionError(message)
    return False


def _same(answer, value) -> bool:
    """Does `answer` make the mistake whose answer is `value`? Numbers and arrays within a loose tolerance
    (the student's float32 arithmetic), a sequence as a list whatever its container, anything else equal."""
    if callable(value) or value is None:
        return False  # a function answer: the checker names its mistakes itself
    if isinstance(value, str) or isinstance(answer, str):
        return isinstance(answer, str) and isinstance(value, str) and answer.strip().lower() == value.strip().lower()
    if isinstance(value, (bool, np.bool_)) or isinstance(answer, (bool, np.bool_)):
        both = isinstance(answer, (bool, np.bool_)) and isinstance(value, (bool, np.bool_))
        return both and bool(answer) == bool(value)
    try:
        v = np.asarray(value, dtype=np.float64)
        finite = np.abs(v[np.isfinite(v)])
        scale = min(1.0, float(finite.max())) if finite.size and finite.max() > 0 else 1.0
        return _close(answer, value, 1e-4 * scale, 1e-3)[0]  # tiny answers (parity of 1e-8) get a tiny tolerance
    except Exception:
        try:
            return bool(answer == value)
        except Exception:
            return False


def named_mistakes(call: Call) -> dict:
    """The mistakes exercise `call.id` names in `call`'s context, {sentence: an answer that makes it}: only
    those that are mistakes there. A named mistake whose answer the checker accepts in this context is
    not one here (the arrays happen to make it give the right value: a sentence with one segment for
    "every token read segment 0", a difference whose largest entry is positive for "you forgot the
    absolute value"), and one whose answer equals an earlier mistake's names nothing new: both are left
    out (`left_out_mistakes` lists them). tests/test_lessons.py asks for at least three that remain, on
    1 and 2 BLAS threads, so an exercise must build its arrays so that its mistakes differ by construction."""
    return _sorted_mistakes(call)[0]


def left_out_mistakes(call: Call) -> dict:
    """The named mistakes `named_mistakes` leaves out in `call`'s context, {sentence: (answer, why)}."""
    return _sorted_mistakes(call)[1]


def _sorted_mistakes(call: Call) -> tuple[dict, dict]:
    ex = _lookup(call.id)
    if ex.mistakes is None:
        return {}, {}
    with np.errstate(all="ignore"), warnings.catch_warnings():  # a mistake's arithmetic (a row of -inf) warns nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        named = dict(ex.mistakes(**call.context))
        kept, left = {}, {}
        for sentence, value in named.items():
            if not callable(value) and value is not None:
                try:
                    accepted = _ok(ex.fn(value, **call.context))
                except Exception:  # a mistake the checker cannot even read is rejected
                    accepted = False
                if accepted:
                    left[sentence] = (value, "the checker accepts it here: it is the right answer in this context")
                    continue
                twin = next((s for s, v in kept.items() if _same(value, v)), None)
                if twin is not None:
                    left[sentence] = (value, f"it gives the same answer as {twin[:60]!r}")
                    continue
            kept[sentence] = value
    return kept, left


def _ok(result) -> bool:
    return bool(result[0] if isinstance(result, tuple) else result)


def calls() -> list[Call]:
    """The last `check` call of each exercise checked in this process, in order of those calls."""
    return list(_CALLS.values())


def _cut(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[:limit - 25] + f" ... ({len(text):,} characters)"


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = 8


def _short(x) -> str:
    """A repr that fits on a line, whatever the size of the answer."""
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} ({x.dtype})"
    return _REPR.repr(x)


_KINDS = ((bool, "True or False (a bool)"), (str, "text (a str)"), (int, "a whole number (an int)"),
          (float, "a number (a float)"), (tuple, "a tuple"), (list, "a list"), (np.ndarray, "an array"))


def _kind(x) -> str:
    if isinstance(x, np.bool_):
        return "True or False (a bool)"
    if isinstance(x, np.integer):
        return "a whole number (an int)"
    if isinstance(x, np.floating):
        return "a number (a float)"
    for t, name in _KINDS:
        if isinstance(x, t):
            return name
    return f"a {type(x).__name__}"


def type_slip(answer, expected) -> str:
    """'' when the answer has the kind of value expected, else a sentence that names both kinds
    ('6' for 6, 'cls' for an index, 1 for True). Ints pass where floats are expected."""
    a, e = _kind(answer), _kind(expected)
    if a == e or (e == "a number (a float)" and a == "a whole number (an int)") or \
            ({a, e} <= {"a tuple", "a list"}):
        return ""
    hint = " (drop the quotes)" if isinstance(answer, str) and e != "text (a str)" else ""
    return f"your answer is {a}, {_short(answer)}; expected {e}{hint}"


# ------------------------------------------------------------------------------------------
# helpers that checkers return
# ------------------------------------------------------------------------------------------


def _as_array(answer, what: str = "your answer"):
    if isinstance(answer, str):
        return None, f"{what} is text (a str), {_short(answer)}; expected a number or an array of numbers (drop the quotes)"
    if hasattr(answer, "__array__") or isinstance(answer, (list, tuple, int, float, complex, np.number, bool)):
        arr = np.asarray(answer)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            return None, f"{what} is not an array of numbers (dtype {arr.dtype})"
        if np.iscomplexobj(arr):  # the right real part with any imaginary part is not the answer
            return None, f"{what} is complex (dtype {arr.dtype}); expected real numbers"
        return arr, ""
    return None, f"{what} is a {type(answer).__name__}, expected an array of numbers"


def close(answer, expected, atol: float = 1e-5, rtol: float = 1e-4, *,
          mistakes: dict[str, Any] | None = None) -> tuple[bool, str]:
    """Numbers or arrays equal to `expected` within atol + rtol * |expected|; the detail names
    what is off (type, shape, the largest difference and where). `mistakes` maps a sentence that
    names a common mistake ("you divided by sqrt(H): the scores use sqrt(d_k)") to the value that
    mistake gives; an answer close to one of them gets that sentence."""
    ok, detail = _close(answer, expected, atol, rtol)
    if not ok and mistakes:
        for sentence, value in mistakes.items():
            if value is not None and _close(answer, value, atol, rtol)[0]:
                return False, sentence
    return ok, detail


def _close(answer, expected, atol: float, rtol: float) -> tuple[bool, str]:
    with np.errstate(all="ignore"):  # inf - inf in a wrong answer is a verdict, not a RuntimeWarning
        return _compare(answer, expected, atol, rtol)


def _compare(answer, expected, atol: float, rtol: float) -> tuple[bool, str]:
    exp = np.asarray(expected, dtype=np.float64)
    arr, why = _as_array(answer)
    if arr is None:
        return False, why
    if arr.shape != exp.shape:
        return False, f"shape {arr.shape} but expected {exp.shape}"
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr) == np.isfinite(exp)):
        return False, "your answer has inf or nan where the expected value does not (or the other way)"
    fin = np.isfinite(exp)
    if not np.array_equal(arr[~fin], exp[~fin], equal_nan=True):
        return False, "your answer's infinities differ from the expected ones"
    diff = np.where(fin, np.abs(arr - exp), 0.0)
    bad = diff > atol + rtol * np.abs(np.where(fin, exp, 0.0))
    if bad.any() and not diff.ndim:
        return False, f"off by {float(diff):.3g}"
    if bad.any():
        where = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), diff.shape) if diff.ndim else ()
        at = f" at index {tuple(int(i) for i in where)}" if where else ""
        return False, (f"{int(bad.sum())} of {bad.size} values differ; largest difference "
                       f"{float(diff.max()):.3g}{at}")
    shape = f"shape {arr.shape}, " if arr.ndim else ""
    return True, f"{shape}matches within {atol:g}"


def equals(answer, expected) -> tuple[bool, str]:
    """Exactly equal (numbers, strings, lists, tuples, arrays); a numpy bool or int counts as the
    Python one, a slip of type ('6' for 6) is named."""
    answer = answer.item() if isinstance(answer, (np.bool_, np.integer, np.floating)) else answer
    expected = expected.item() if isinstance(expected, (np.bool_, np.integer, np.floating)) else expected
    if isinstance(answer, (complex, np.complexfloating)) or (isinstance(answer, np.ndarray) and np.iscomplexobj(answer)):
        return False, f"your answer is complex, {_short(answer)}; expected {_kind(expected)}"
    if isinstance(answer, float) and type(expected) is int and answer.is_integer():
        answer = int(answer)  # 6.0 is the whole number 6 (a mean, a count computed in floats)
    slip = type_slip(answer, expected)
    if slip:
        return False, slip
    if isinstance(expected, np.ndarray) or isinstance(answer, np.ndarray):
        a, e = np.asarray(answer), np.asarray(expected)
        if a.shape != e.shape:
            return False, f"shape {a.shape} but expected {e.shape}"
        return (True, "exactly right") if np.array_equal(a, e) else (False, "some entries differ")
    if isinstance(expected, (list, tuple)) and isinstance(answer, (list, tuple)):
        if len(answer) != len(expected):
            return False, f"{len(answer)} items but expected {len(expected)}"
        firsts = [i for i, (a, e) in enumerate(zip(answer, expected)) if a != e]
        return (True, "exactly right") if not firsts else (False, f"item {firsts[0]} differs")
    if type(answer) is bool or type(expected) is bool:
        same = type(answer) is type(expected) and answer == expected
    else:
        same = answer == expected
    return (True, "exactly right") if same else (False, f"{_short(answer)} is not the answer")


def sequence(answer, expected, what: str = "your answer") -> tuple[bool, str]:
    """An ordered sequence of whole numbers (rows, a shape, a (layer, head) pair): a list, a tuple and a
    1-d array are alike, and so are 6 and 6.0; only the items and their order count."""
    if isinstance(answer, np.ndarray) and answer.ndim == 1:
        answer = answer.tolist()
    if not isinstance(answer, (list, tuple)):
        return False, (f"{what} is {_kind(answer)}, {_short(answer)}; expected a sequence of whole numbers, "
                       f"e.g. {list(expected)[:3]}")
    items = []
    for i, x in enumerate(answer):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, float, np.floating)) \
                or not float(x).is_integer():
            return False, f"item {i} of {what}, {_short(x)}, is not a whole number"
        items.append(int(x))
    return equals(items, [int(e) for e in expected])


def one_of(answer, options) -> tuple[bool, str]:
    """The answer is one of `options` (e.g. several heads tie)."""
    options = list(options)
    answer = answer.item() if isinstance(answer, (np.bool_, np.integer, np.floating)) else answer
    if options and all(type_slip(answer, o) for o in options):
        return False, type_slip(answer, options[0])
    try:
        hit = answer in options
    except (TypeError, ValueError):  # an array answer: `in` is ambiguous
        hit = False
    return (True, "one of the right answers") if hit else (False, f"{_short(answer)} is not one of the answers")


def within(answer, lo: float, hi: float, what: str = "your answer") -> tuple[bool, str]:
    """A number between lo and hi (inclusive): for predictions and open-ended answers."""
    arr, why = _as_array(answer, what)
    if arr is not None and arr.dtype == bool:
        return False, f"{what} is True or False; expected a number"
    if arr is None or arr.ndim != 0:
        return False, why or f"{what} should be one number"
    v = float(arr)
    return (True, f"{v:.4g} is within [{lo:g}, {hi:g}]") if lo <= v <= hi else \
        (False, f"{v:.4g} is outside [{lo:g}, {hi:g}]")


def formula(answer, cases: list[tuple[dict, Any]], signature: str,
            mistakes: dict[str, Callable] | None = None) -> tuple[bool, str]:
    """A "write the formula, not the number" exercise: the answer is a function (`signature`, like
    "my_count(c)"), checked on several models' sizes (`cases`: keyword arguments and the value the
    engine counts for them). A typed number cannot pass: it is right for one model only. `mistakes`
    maps a sentence to a wrong formula (a function): an answer that agrees with it on every case gets
    the sentence."""
    if callable(answer) and mistakes:
        try:
            got = [answer(**kwargs) for kwargs, _ in cases]
        except Exception:
            got = None
        if got is not None and got != [e for _, e in cases]:
            for sentence, wrong in mistakes.items():
                if got == [wrong(**kwargs) for kwargs, _ in cases]:
                    return False, sentence
    if not callable(answer):
        what = "a number" if isinstance(answer, (int, float, np.number)) else _kind(answer)
        return False, (f"your answer is {what}; write the formula as a function, def {signature}: return ..., "
                       "so it can be checked on other models' sizes")
    for kwargs, expected in cases:
        args = ", ".join(f"{k}={v}" for k, v in kwargs.items() if not hasattr(v, "__dataclass_fields__")) or \
            ", ".join(f"{k}: {v.hidden_size}-wide, {v.num_layers} layers" for k, v in kwargs.items())
        got = answer(**kwargs)
        if got is Ellipsis:
            return False, STUB
        slip = type_slip(got, int(expected)) if not isinstance(got, (float, np.floating)) else ""
        if slip:
            return False, f"for {args}: {slip}"
        if got != expected:
            typed = all(answer(**k) == got for k, _ in cases)  # the same for every model: a number, not a formula
            return False, (f"for {args} your formula gives {_short(got)}, the model has {int(expected):,}"
                           + (" (a typed number is right for one model only)" if typed else ""))
    return True, f"right for all {len(cases)} models"


# ------------------------------------------------------------------------------------------
# wrong answers, for the course's own test
# ------------------------------------------------------------------------------------------


def _perturb(answer) -> list:
    """Generic wrong answers near a right one."""
    if isinstance(answer, bool) or isinstance(answer, np.bool_):
        return [not answer]
    if isinstance(answer, str):
        return [answer + "?", ""]
    if isinstance(answer, (int, np.integer)):
        return [answer + 1, answer - 1]
    if isinstance(answer, (float, np.floating)):
        return [answer + 1.0 + abs(answer), -answer - 1.0]
    if isinstance(answer, np.ndarray) and answer.dtype.kind in "fiu":
        wrong = [answer.astype(np.float64) + 1.0]
        if answer.ndim:
            wrong.append(answer.T if answer.ndim == 2 and answer.shape[0] != answer.shape[1] else answer[..., :-1])
        return wrong
    if isinstance(answer, (list, tuple)):
        return [type(answer)(list(answer)[:-1]), type(answer)(list(answer) + list(answer)[:1])] if answer else [[0]]
    return [None]


def wrong_answers(call: Call) -> list:
    """Answers the checker of `call.id` must reject: the exercise's own `wrong`, else perturbations."""
    ex = _lookup(call.id)
    wrong = ex.wrong(call.answer, **call.context) if ex.wrong else _perturb(call.answer)
    return [Ellipsis, *wrong, *named_mistakes(call).values()]


# ------------------------------------------------------------------------------------------
# stored pictures
# ------------------------------------------------------------------------------------------


def picture(what, view: str | None = None, *, dpi: int | None = 80, head: int = 0, query: int = 0, **args):
    """A static PNG for a lesson's "Look" section, as an IPython Image; show it in a cell whose first
    line is `# PICTURE` (scripts/refresh_notebooks.py stores it, so the lesson reads on GitHub).

    what:
    - a trace, with `view` one of bertviz_lite.views.VIEWS and that view's arguments:
      `picture(tr, "attention", layer=5, head=11)`, `picture(tr, "model")`,
      `picture(tr, "head", layer=1, heads=[8, 9])`, `picture(tr, "step", key="embed.ln")`,
      `picture(tr, "params", ledger=ledger)`: drawn by bertviz_lite.views.to_png from the same view
      data as the live views;
    - view data (`bertviz_lite.views.view_data(...)`, maybe with its arrays replaced);
    - a matplotlib Figure (a plotly figure is not redrawn: pass the trace and a view name, or draw
      the lesson's own figure with matplotlib): saved with a tight bounding box, so a label that runs past
      the axes is kept whole, never cropped.
    """
    import io

    from IPython.display import Image

    buf = io.BytesIO()
    if isinstance(what, dict):
        _view_png(what, buf, head=head, query=query, dpi=dpi)
    elif hasattr(what, "savefig"):
        what.savefig(buf, format="png", dpi=dpi or what.dpi, bbox_inches="tight", facecolor="white")
    elif view is not None:
        from bertviz_lite.views import view_data

        if view == "attention":
            head = what.check_head(head)
        vd = view_data(what, view, **args)
        _view_png(vd, buf, head=head, query=query, dpi=dpi)
    else:
        raise TypeError(f"picture() draws a trace (with view=...), view data or a matplotlib Figure; "
                        f"got {type(what).__name__}" + ("" if view else " without view="))
    return Image(data=buf.getvalue())


def _view_png(vd: dict, buf, *, head: int, query: int, dpi):
    from bertviz_lite.views import to_png

    to_png(vd, buf, head=head, query=query, dpi=dpi)


def model_config(name: str = "minilm"):
    """The BertConfig of the model a lesson runs, without loading its weights, so that a lesson's strip of the
    forward pass is drawn at that model's sizes (MiniLM: 6 layers, d_k = 32): "minilm" and "minilm-mlm" read
    the installed all-MiniLM-L6-v2's config.json, "random" is BERT-base, a Hugging Face name reads its cached
    config.json."""
    from bertviz_lite import BertConfig, loading

    if name == "random":
        return BertConfig()
    if name in ("minilm", "minilm-mlm"):
        return BertConfig.from_json(loading.find_minilm() / "config.json")
    folder = loading.cached_folder(name)
    if folder is None:
        raise ValueError(f"model_config: {name!r} is not 'minilm', 'minilm-mlm', 'random' or a cached Hugging Face "
                         "model")
    return BertConfig.from_json(Path(folder) / "config.json")


LAYERS = ("**Layer numbers.** Formulas count the layers 1..L, as the paper and `hidden_states` do; trace keys count "
          "them from 0, as code does. So trace `layer.{l}` is formula layer l+1: it reads $Z_l$ and writes $Z_{l+1}$ "
          "(`layer.{l}.ffn.ln`). $Z_0$ is `embed.ln`, the embeddings after their LayerNorm, and $Z_L$ is "
          "`layer.{L-1}.ffn.ln`. A formula line of layer $l$ (reading $Z_{l-1}$) is recorded under `layer.{l-1}.`, "
          "which is how every table and picture of the course writes it.")


def symbol_table() -> str:
    """The course's "One symbol per thing" table as markdown, from `bertviz_lite.schema.SYMBOLS` (each
    lesson carries it as a markdown cell, so GitHub shows it; tests/test_lessons.py keeps them in step)."""
    from bertviz_lite.schema import SYMBOLS

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [f"| `{s.symbol}` | {cell(s.meaning)} | {cell(', '.join(s.also))} |" for s in SYMBOLS]
    return ("**The course's table of symbols**, the same in every lesson (the package's "
            "`bertviz_lite.schema.SYMBOLS`): $A$ is only ever an attention map, the number of heads is $n_h$.\n\n"
            "| symbol | what it is | other names in the sources and code |\n|---|---|---|\n" + "\n".join(rows)
            + "\n\n" + LAYERS)


def forward_pass(config, n: int, *, highlight=(), long: int | None = None):
    """The data-flow figure of the whole forward pass, drawn from `bertviz_lite.schema.STEPS` (a
    matplotlib Figure; show it with `picture(...)`): every trace key top to bottom, its formula, its
    shape at the lesson's n and at `long` tokens (the card's 512: config.max_positions), and the
    weights it reads. The layer steps sit in one box repeated L times. `highlight` names the keys a
    lesson computes ("attn.scores", "embed.sum"): they are filled, the rest is grey; an optional head
    ("mlm.logits", "head.logits") is drawn only when highlighted."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    from bertviz_lite import schema

    long = long or config.max_positions
    # every step a BERT runs, and an optional one (the masked-LM or a task head) when highlighted
    steps = [st for st in schema.STEPS if not st.optional or (st.key in highlight and schema.STEP_BY_KEY[st.key] is st)]
    unknown = set(highlight) - {st.key for st in steps}
    if unknown:
        known = list(dict.fromkeys(st.key for st in schema.STEPS))
        raise ValueError(f"forward_pass: no step {sorted(unknown)}; the steps are {known}")
    rows = len(steps)
    fig = Figure(figsize=(12.5, 0.34 * rows + 1.1))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 12.5)
    ax.set_ylim(rows + 1.6, -0.3)
    ax.axis("off")
    cols = (0.35, 2.35, 6.55, 8.25, 9.95)
    for x, head in zip(cols, ("trace key", "formula", f"shape, n = {n}", f"shape, n = {long}", "weights it reads")):
        ax.text(x, 0.2, head, fontsize=10, fontweight="bold", va="center")
    layer_rows = [i for i, st in enumerate(steps) if st.scope == "layer"]
    top, bottom = layer_rows[0] + 1, layer_rows[-1] + 1
    ax.add_patch(FancyBboxPatch((0.12, top - 0.45), 12.25, bottom - top + 0.9, boxstyle="round,pad=0.02",
                                facecolor="#f4f6fb", edgecolor="#7a86a8", linewidth=1.2))
    ax.text(0.2, (top + bottom) / 2, f"x L = {config.num_layers} layers", rotation=90, fontsize=9, va="center",
            ha="center", color="#4a5578")

    def shape(key, m):
        return " x ".join(str(d) for d in schema.shape_of(key, config, m))

    for i, st in enumerate(steps, start=1):
        on = not highlight or st.key in highlight
        colour = "black" if on else "#9a9a9a"
        if highlight and st.key in highlight:
            ax.add_patch(FancyBboxPatch((0.3, i - 0.36), 12.0, 0.72, boxstyle="round,pad=0.01",
                                        facecolor="#ffe9a8", edgecolor="#d39b00", linewidth=1.0))
        key = (LAYER_PREFIX if st.scope == "layer" else "") + st.key
        ax.text(cols[0], i, key, fontsize=9, family="monospace", va="center", color=colour)
        line = st.formula if st.optional else schema.formula_of(st.key, config)  # the config's own line
        try:  # the step's formula through mathtext; a formula it cannot parse is written as text
            from matplotlib.mathtext import MathTextParser
            MathTextParser("path").parse(f"${line}$")
            formula = f"${line}$"
        except Exception:
            formula = line
        ax.text(cols[1], i, formula, fontsize=10, va="center", color=colour)
        ax.text(cols[2], i, shape(st.key, n), fontsize=9, va="center", color=colour)
        ax.text(cols[3], i, shape(st.key, long), fontsize=9, va="center", color=colour)
        ax.text(cols[4], i, ", ".join(w.split(".")[-1] for w in st.reads) or "-", fontsize=9, va="center",
                family="monospace", color=colour)
    ax.text(0.35, rows + 1.15, f"{config.num_layers} layers, H = {config.hidden_size}, n_h = {config.num_heads} heads "
            f"of d_k = {config.head_size}, d_ffnn = {config.ffn_size}, N_V = {config.vocab_size:,}; "
            "drawn from bertviz_lite.schema.STEPS", fontsize=9, color="#444444", va="center")
    return fig


# the formulas of a layer read Z_{l-1} (layer l of 1..L), which the trace records under layer.{l-1} (see LAYERS)
LAYER_PREFIX = "layer.{l-1}."

# where each step's box sits in the data-flow picture (x centre, row): the layout is the picture's own; what is
# drawn in the boxes and which arrows join them come from schema.STEPS (key, formula, takes)
_FLOW = {"embed.token": (1.9, 0), "embed.position": (5.0, 0), "embed.segment": (8.1, 0), "embed.sum": (5.0, 1),
         "embed.ln": (5.0, 2), "embed.proj": (5.0, 2.9), "Z_{l-1}": (5.0, 3.3), "attn.q": (1.9, 4.4),
         "attn.k": (5.0, 4.4), "attn.v": (8.1, 4.4), "attn.scores": (3.3, 5.4), "attn.probs": (3.3, 6.4),
         "attn.context": (6.7, 7.4), "attn.concat": (5.0, 8.6), "attn.out": (5.0, 9.6), "attn.resid": (5.0, 10.6),
         "attn.ln": (5.0, 11.6), "ffn.up": (5.0, 12.6), "ffn.act": (5.0, 13.6), "ffn.down": (5.0, 14.6),
         "ffn.resid": (5.0, 15.6), "ffn.ln": (5.0, 16.6), "pooler.out": (2.6, 18.2), "mlm.logits": (7.4, 18.2),
         "head.logits": (2.6, 19.3)}
_SIDE = {"attn.q", "attn.k", "attn.v", "attn.scores", "attn.probs", "attn.context", "embed.token", "embed.position",
         "embed.segment", "pooler.out", "mlm.logits", "head.logits"}


def flow_picture(config, *, highlight=(), head: str | None = None, strip: bool = False, dpi_scale: float = 1.0):
    """The forward pass as data flow (a matplotlib Figure; show it with `picture(...)`): one box per trace key
    of `bertviz_lite.schema.STEPS` with its formula, arrows from each step's `takes`, the residual branches
    around attention and the feed-forward block, the split into n_h heads and their concatenation, the L-fold
    layer box, and the fork into the pooler ([CLS] row) and the masked-LM head (every row).
    `highlight` fills the boxes of the keys a lesson computes; `strip=True` draws only the rows around them
    (a lesson's own part of the picture). `head` adds a task head (an optional STEPS entry, e.g.
    "sequence_classification")."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch, Rectangle

    from bertviz_lite import schema

    head = head if head is not None else getattr(config, "head", None)
    steps = {st.key: st for st in schema.STEPS if not st.optional}
    steps["mlm.logits"] = next(st for st in schema.STEPS if st.key == "mlm.logits")
    if config.embed_size == config.hidden_size:
        steps.pop("embed.proj", None)
    if head is not None:
        found = [st for st in schema.STEPS if st.key == "head.logits" and st.optional == head]
        if not found:
            raise ValueError(f"flow_picture: no task head {head!r}; the heads are "
                             f"{[st.optional for st in schema.STEPS if st.key == 'head.logits']}")
        steps["head.logits"] = found[0]
    else:
        steps.pop("head.logits", None)
    missing = set(steps) - set(_FLOW)
    if missing:  # a new step in schema.STEPS needs a place in the picture
        raise ValueError(f"flow_picture: no place for the steps {sorted(missing)}")
    unknown = set(highlight) - set(steps)
    if unknown:
        raise ValueError(f"flow_picture: no step {sorted(unknown)}; the steps are {list(steps)}")
    # a strip: the highlighted steps, the steps they take and the steps that take them
    near = set(highlight) | {t for k in highlight for t in steps[k].takes} | \
        {k for k, st in steps.items() if set(st.takes) & set(highlight)}
    near = {"ffn.ln" if k == "Z_L" else k for k in near}
    rows = [_FLOW[k][1] for k in near if k in _FLOW] if strip and highlight else []
    top, bottom = (min(rows) - 0.6, max(rows) + 0.6) if rows else (-0.7, max(_FLOW[k][1] for k in steps) + 1.1)
    fig = Figure(figsize=(8.6, 0.52 * (bottom - top) + 0.3))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.2, 10.4)
    ax.set_ylim(bottom, top)
    ax.axis("off")
    grey, line = "#9a9a9a", "#555555"
    inch = 0.52  # inches per unit of y (the figure's height above)
    behind = dict(facecolor="white", edgecolor="none", pad=0.6)  # a label sits on white: no line runs through it

    def label(x, y, text, **kw):
        return ax.text(x, y, text, bbox={**behind, "facecolor": kw.pop("back", "white")}, zorder=4, **kw)

    def along(x, y0, y1, texts, size, **kw):
        """A label that runs down the y range y0..y1, put where that range is drawn (a strip shows a part of it):
        the first of `texts` that fits there, whole, or none; never a label cut by the picture's edge."""
        lo, hi = max(y0, top + 0.1), min(y1, bottom - 0.1)
        for text in texts:
            if len(text) * size * 0.5 / 72 <= (hi - lo) * inch:
                label(x, (lo + hi) / 2, text, rotation=90, fontsize=size, va="center", **kw)
                return

    def formula(st):
        text = st.formula if st.optional else schema.formula_of(st.key, config)
        try:
            from matplotlib.mathtext import MathTextParser
            MathTextParser("path").parse(f"${text}$")
            return f"${text}$"
        except Exception:
            return text

    def box(key):
        x, y = _FLOW[key]
        if key == "Z_{l-1}":
            return x, y, 1.2, 0.3
        return x, y, (2.9 if key in _SIDE else 5.6) / 2, 0.36

    # the layer box (L times) and the heads' box
    ax.add_patch(FancyBboxPatch((0.05, 2.75), 10.1, 14.35, boxstyle="round,pad=0.02", facecolor="#f4f6fb",
                                edgecolor="#7a86a8", linewidth=1.2, zorder=0))
    L = config.num_layers
    along(10.3, 2.75, 17.1, [f"x L = {L} layers: formula layer l is trace layer.{{l-1}}; its output Z_l is the next "
                             "layer's input", f"x L = {L} layers", f"L = {L}"], 8, ha="center", color="#4a5578",
          back="#f4f6fb")
    ax.add_patch(Rectangle((0.3, 3.9), 9.6, 4.05, facecolor="none", edgecolor="#7a86a8", linestyle="--", linewidth=1))
    if top < 7.6 < bottom:
        label(0.45, 7.6, f"split into n_h = {config.num_heads} heads of d_k = {config.head_size}:\n"
              "each head runs these lines on its own columns", fontsize=7.5, ha="left", va="center", color="#4a5578",
              back="#f4f6fb")
    if top < 8.12 < bottom:
        label(6.0, 8.12, "concatenate the heads", fontsize=7.5, ha="left", va="center", color="#4a5578", back="#f4f6fb")

    def arrow(a, b, text="", colour=line, via=None):
        (xa, ya, _, ha), (xb, yb, _, hb) = box(a), box(b)
        start, end = (xa, ya + ha), (xb, yb - hb)
        if via is not None:  # a residual branch: out sideways, down, back in
            side = via
            xa_edge = xa - box(a)[2] if side < xa else xa + box(a)[2]
            xb_edge = xb - box(b)[2] if side < xb else xb + box(b)[2]
            ax.plot([xa_edge, side, side], [ya, ya, yb], color=colour, linewidth=1.3, zorder=1)
            ax.annotate("", xy=(xb_edge, yb), xytext=(side, yb),
                        arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=1.3), zorder=1)
            along(side, ya, yb, [text, text.split(":")[0]], 7.5, ha="center", color=colour, back="#f4f6fb")
            return
        ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=1.1),
                    zorder=1)
        if text and top < (start[1] + end[1]) / 2 < bottom:
            label((start[0] + end[0]) / 2 + 0.12, (start[1] + end[1]) / 2, text, fontsize=7.5, color=colour,
                  va="center", back="#f4f6fb" if 2.75 < start[1] < 17.1 else "white")

    source = {"Z_{l-1}": "Z_{l-1}", "Z_L": "ffn.ln"}
    for key, st in steps.items():
        for src in st.takes:
            src = source.get(src, src)
            if key == "attn.resid" and src == "Z_{l-1}":
                arrow(src, key, "residual: Z_(l-1) skips attention", colour="#b5562b", via=0.2)
            elif key == "ffn.resid" and src == "attn.ln":
                arrow(src, key, "residual: Z-bar skips the FFN", colour="#b5562b", via=9.6)
            elif src in _FLOW and src in steps or src == "Z_{l-1}":
                text = {"pooler.out": "[CLS] row", "mlm.logits": "every row"}.get(key, "") if src == "ffn.ln" else ""
                arrow(src, key, text)
    arrow(steps.get("embed.proj") and "embed.proj" or "embed.ln", "Z_{l-1}", "layer.0 reads Z_0")
    def shown(key):  # a box a strip draws whole (texts are not clipped to the axes: one outside would show)
        _, y, _, h = box(key)
        return top <= y - h and y + h <= bottom

    # the layer input and the boxes
    x, y, w, h = box("Z_{l-1}")
    if shown("Z_{l-1}"):
        ax.add_patch(FancyBboxPatch((x - w, y - h), 2 * w, 2 * h, boxstyle="round,pad=0.02", facecolor="white",
                                    edgecolor=line))
        ax.text(x, y, r"$Z_{l-1}$  (the layer's input)", fontsize=8.5, ha="center", va="center")
    for key, st in steps.items():
        if not shown(key):
            continue
        x, y, w, h = box(key)
        on, faded = key in highlight, strip and highlight and key not in highlight  # a strip greys its context
        ax.add_patch(FancyBboxPatch((x - w, y - h), 2 * w, 2 * h, boxstyle="round,pad=0.02", zorder=2,
                                    facecolor="#ffe9a8" if on else "white",
                                    edgecolor="#d39b00" if on else (grey if faded else line),
                                    linewidth=1.4 if on else 0.9))
        colour = grey if faded else "black"
        prefix = LAYER_PREFIX if st.scope == "layer" else ""
        ax.text(x, y - 0.15, prefix + key, fontsize=7.5, family="monospace", ha="center", va="center", color=colour,
                zorder=3)
        ax.text(x, y + 0.14, formula(st), fontsize=8.5, ha="center", va="center", color=colour, zorder=3)
    if not strip:
        ax.text(0.1, bottom - 0.25, f"{config.num_layers} layers, H = {config.hidden_size}, n_h = {config.num_heads}, "
                f"d_k = {config.head_size}, d_ffnn = {config.ffn_size}; boxes, formulas and arrows drawn from "
                "bertviz_lite.schema.STEPS (key, formula, takes)", fontsize=7.5, color="#444444")
    return fig


def vectors_picture(tr, stages, *, layer: int = 0, tokens: int | None = None, title: str | None = None):
    """Per-token vectors as coloured rows, stage by stage, drawn from a trace (a matplotlib Figure; show it with
    `picture(...)`): each stage is one trace key, one row of colour per token and one column per feature (red
    above 0, blue below, each panel scaled to its own 99th percentile, so one large feature does not wash out
    the rest). A stage is a key (`"embed.sum"`; a layer key is read from `layer`) or a pair (key, how):
    - "rows": the [n, H] array as it is;
    - "heads": a [head, n, d_k] key (`attn.q`, `attn.context`) drawn as its n_h blocks side by side with a gap
      between them, each framed in its head's colour: the split into heads;
    - "joined": the same heads put back side by side as one [n, n_h * d_k] array with the blocks framed in the
      same colours: the concatenation (for `attn.q` it is Z W^Q before the split); an [n, H] key (`attn.concat`)
      is framed every d_k columns.
    A 3-d key is drawn as "heads" unless told otherwise. `tokens` keeps the first that many tokens."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    stages = [(s, None) if isinstance(s, str) else tuple(s) for s in stages]
    panels = []
    for key, how in stages:
        value = np.asarray(tr.get(key, layer=layer) if key.split(".")[0] in ("attn", "ffn") else tr[key],
                           dtype=np.float64)
        how = how or ("heads" if value.ndim == 3 else "rows")
        given = value.shape  # the key's own shape, for the title
        if how == "joined" and value.ndim == 2:  # an [n, H] key (attn.concat): cut into the heads' column blocks
            value = np.stack(np.split(value, tr.config.num_heads, axis=-1))
        if how not in ("rows", "heads", "joined") or (how != "rows") != (value.ndim == 3):
            raise ValueError(f"vectors_picture: {key} is {value.ndim}-d; 'rows' draws [n, H], 'heads' draws "
                             f"[head, n, d_k], 'joined' either; got {how!r}")
        if tokens is not None:
            value = value[..., :tokens, :]
        panels.append((key, how, value, given))
    n = panels[0][2].shape[-2]
    panels = [(key, how, value, given[:-2] + (n,) + given[-1:]) for key, how, value, given in panels]
    labels = list(tr.tokens)[:n]
    gap = 4  # columns of white between two heads
    width = max(v.shape[-1] * v.shape[0] + gap * (v.shape[0] - 1) if h == "heads" else
                v.shape[-1] * (v.shape[0] if h == "joined" else 1) for _, h, v, _ in panels)
    fig = Figure(figsize=(10.5, 0.3 + len(panels) * (0.13 * n + 0.6)))
    grid = fig.add_gridspec(len(panels), 1, hspace=0.45, left=0.1, right=0.98, top=0.93 if title else 0.97,
                            bottom=0.03)
    dark = colormaps["tab20"]

    def head_colour(h):  # the darker half of tab20, ten colours in turn
        return dark(2 * (h % 10))

    for i, (key, how, value, given) in enumerate(panels):
        ax = fig.add_subplot(grid[i])
        blocks = list(value) if value.ndim == 3 else [value]
        lim = float(np.percentile(np.abs(value), 99)) or 1.0
        x = 0
        for h, block in enumerate(blocks):
            w = block.shape[-1]
            ax.imshow(block, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest",
                      extent=(x - 0.5, x + w - 0.5, n - 0.5, -0.5))
            if value.ndim == 3:
                ax.add_patch(Rectangle((x - 0.5, -0.5), w, n, fill=False, linewidth=1.4,
                                       edgecolor=head_colour(h)))
                if how == "heads" and (len(blocks) <= 12 or h % 2 == 0):
                    ax.text(x + w / 2, -0.9, f"head {h}", ha="center", va="bottom", fontsize=7,
                            color=head_colour(h))
            x += w + (gap if how == "heads" else 0)
        ax.set_xlim(-0.5, width - 0.5)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.set_xticks([])
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        scope = f"layer.{layer}." if key.split(".")[0] in ("attn", "ffn") else ""
        shape, d = " x ".join(str(s) for s in given), value.shape[-1]
        joined = (f"[{shape}]: the heads' blocks of d_k = {d} columns framed" if len(given) == 2 else
                  f"[{shape}] put side by side: [{n} x {value.shape[0] * d}]")
        what = {"rows": f"[{shape}]: one row per token", "heads": f"[{shape}]: split into {len(blocks)} heads",
                "joined": joined}[how]
        ax.set_title(f"{scope}{key}  {what}   (colour: the value, scaled to +-{lim:.2g})", fontsize=8.5, loc="left",
                     pad=12 if how == "heads" else 4)
    if title:
        fig.suptitle(title, fontsize=10, x=0.1, ha="left")
    return fig


# ------------------------------------------------------------------------------------------
# live controls
# ------------------------------------------------------------------------------------------


def try_it(draw: Callable[..., Any], **controls) -> None:
    """A lesson's "Try it": the `controls` (ipywidgets with a `.value`, passed by the name of
    `draw`'s argument they set) above what `draw(**values)` prints and shows; moving a control
    redraws it in place.

        try_it(draw, layer=widgets.Dropdown(options=range(6), value=2), head=widgets.Dropdown(...))

    The first drawing is the cell's own output (a lesson run and saved shows it without a kernel);
    a redraw replaces each output through its display id. This is not
    `widgets.interactive`: that draws into an `Output` widget, and nbclient (as nbval's neighbours
    and `jupyter execute` run it) answers output captured by an Output widget with a message on the
    kernel's shell channel while it is waiting on that channel for the cell's reply. That write can
    swallow the reply's wake-up, and the run then sits idle for the whole cell timeout (lessons 01,
    03 and 06 took 300 s longer under `NotebookClient(nb, timeout=300)`). Here no Output widget
    ever holds output, so nbclient never writes while it waits.
    """
    from IPython.display import display

    import ipywidgets as widgets

    def values() -> dict:
        return {name: w.value for name, w in controls.items()}

    for name, w in controls.items():  # labelled by the argument they set, as interact labels them
        w.description = w.description or name
    display(widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")))
    handles = [display(data, metadata=md, raw=True, display_id=True) for data, md in _captured(draw, values())]

    def redraw(change) -> None:
        try:
            outputs = _captured(draw, values())
        except Exception as e:  # a live redraw shows the error where the picture was
            outputs = [({"text/plain": f"{type(e).__name__}: {e}"}, {})]
        if len(outputs) > len(handles):  # more outputs than the first drawing had slots: say so, lose none silently
            extra = len(outputs) - len(handles) + 1
            outputs = outputs[:len(handles) - 1] + [({"text/plain": f"({extra} outputs: run the cell again)"}, {})]
        blank = ({"text/plain": ""}, {})
        for i, handle in enumerate(handles):
            data, md = outputs[i] if i < len(outputs) else blank
            # plotly's JupyterLab renderer draws a figure once and ignores later updates of it, so each output is
            # first replaced by text: a change of mime type makes JupyterLab build a fresh renderer
            handle.update(blank[0], raw=True)
            handle.update(data, metadata=md, raw=True)

    for w in controls.values():
        w.observe(redraw, names="value")


def _captured(draw: Callable[..., Any], values: dict) -> list[tuple[dict, dict]]:
    """What `draw(**values)` prints and displays, as (mime bundle, metadata) pairs: printed text first."""
    from IPython.utils.capture import capture_output

    with capture_output(stdout=True, stderr=True, display=True) as cap:
        draw(**values)
    outputs = [({"text/plain": text}, {}) for text in (cap.stdout, cap.stderr) if text]
    return outputs + [(o.data, o.metadata or {}) for o in cap.outputs]
