"""A small table type (shapes, parameter ledger, reconciliation, comparisons): prints as text,
renders as HTML in a notebook."""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field

PRINT_WIDTH = 100  # print(table) fits this many characters; table.format(width) for another


@dataclass
class Table:
    """Rows with named columns; prints as text, renders as HTML in a notebook."""

    columns: tuple[str, ...]
    rows: list[tuple] = field(default_factory=list)
    title: str = ""
    # columns of long prose (reconcile's "includes"): printed under the table as wrapped lines, one per row
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def column(self, name: str) -> list:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def to_dicts(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    @staticmethod
    def _fmt(v) -> str:
        if isinstance(v, bool) or v is None:
            return "" if v is None else str(v)
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, tuple):
            return "(" + ", ".join(str(x) for x in v) + ")"
        return str(v)

    def __str__(self) -> str:
        return self.format(PRINT_WIDTH) if self.notes else self._full()

    def _full(self) -> str:
        cells = [[self._fmt(v) for v in r] for r in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        numeric = [all(isinstance(r[i], int) and not isinstance(r[i], bool) for r in self.rows) and self.rows
                   for i in range(len(self.columns))]

        def line(vals):
            return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

        out = [self.title] if self.title else []
        out += [line(self.columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def format(self, width: int | None = None) -> str:
        """The table as text at most `width` characters wide: the widest text columns are cut
        (ending in '…') until it fits; numbers are never cut."""
        if width is None:
            return str(self)
        shown = [i for i, c in enumerate(self.columns) if c not in self.notes]
        columns = [self.columns[i] for i in shown]
        rows = [[r[i] for i in shown] for r in self.rows]
        cells = [[self._fmt(v) for v in r] for r in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        numeric = [bool(rows) and all(isinstance(r[i], int) and not isinstance(r[i], bool) for r in rows)
                   for i in range(len(columns))]
        while sum(widths) + 2 * (len(widths) - 1) > width:
            cuttable = [i for i in range(len(widths)) if not numeric[i] and widths[i] > max(8, len(columns[i]))]
            if not cuttable:
                break
            i = max(cuttable, key=lambda j: widths[j])
            widths[i] = max(8, len(columns[i]), widths[i] - (sum(widths) + 2 * (len(widths) - 1) - width))

        def cut(v: str, w: int) -> str:
            return v if len(v) <= w else v[: w - 1] + "\u2026"

        def line(vals):
            return "  ".join(cut(v, w).rjust(w) if num else cut(v, w).ljust(w)
                             for v, w, num in zip(vals, widths, numeric)).rstrip()

        out = [cut(self.title, width)] if self.title else []
        out += [line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
        for r in self.rows:  # the prose columns, one wrapped paragraph per row
            text = "; ".join(f"{c} {self._fmt(r[self.columns.index(c)])}" for c in self.notes
                             if r[self.columns.index(c)])
            if text:
                out.append(textwrap.fill(f"{self._fmt(r[0])}: {text}", width=width, initial_indent="- ",
                                         subsequent_indent="  ", break_on_hyphens=False))
        return "\n".join(out)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(self._fmt(v))}</td>" for v in r) + "</tr>"
                       for r in self.rows)
        cap = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
