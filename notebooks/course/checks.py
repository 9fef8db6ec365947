"""The course's exercise checker: one module for every lesson (issue 11 item 3).

In a lesson, the student's cell holds a `...` stub; the cell after it checks the answer:

    from course.checks import check
    my_scores = ...                       # your code here
    check("04.1", my_scores, tr=tr)       # "✅ correct (04.1): ..." or "❌ not yet (04.1): ... hint: ..."

`check` never raises for a wrong answer (a committed lesson with its stubs runs cleanly under
nbval) unless the environment sets BERTVIZ_COURSE_STRICT=1: then a failed check raises
AssertionError (tests/course/test_lessons.py runs every lesson with its solutions under strict mode).

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

HERE = Path(__file__).resolve().parents[1]  # notebooks/, which holds exercises/
STRICT_ENV = "BERTVIZ_COURSE_STRICT"
STUB = "replace the ... with your answer"

__all__ = ["check", "checker", "exercise", "close", "equals", "one_of", "within", "sequence", "formula", "calls",
           "wrong_answers", "named_mistakes", "left_out_mistakes"]
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
    never holds the solution's code line (tests/course/test_lessons.py checks it against notebooks/solutions/).
    `wrong(answer, **context)`, if given, returns answers the checker must reject (the test
    of the course replays every check with them; by default it perturbs the right answer).
    `prediction=True` marks a "predict first" exercise: no number printed above its stub may pass it.
    `mistakes(**context)` returns the mistakes the lesson discusses, {sentence: an answer that makes it}
    ("you divided by sqrt(H): the scores use sqrt(d_k)": Q @ K.T / sqrt(H)). A wrong answer equal to one of
    them (numbers within a tolerance) is answered with its sentence; a checker may also recognise a mistake
    itself (a function answer) and return the sentence. tests/course/test_lessons.py holds every sentence to the
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
    out (`left_out_mistakes` lists them). tests/course/test_lessons.py asks for at least three that remain, on
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
