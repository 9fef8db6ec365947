"""A small table type (shapes, parameter ledger, reconciliation, comparisons): prints as text,
renders as HTML in a notebook."""

from __future__ import annotations

import html
from dataclasses import dataclass, field


@dataclass
class Table:
    """Rows with named columns; prints as text, renders as HTML in a notebook."""

    columns: tuple[str, ...]
    rows: list[tuple] = field(default_factory=list)
    title: str = ""

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
        cells = [[self._fmt(v) for v in r] for r in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        numeric = [all(isinstance(r[i], int) and not isinstance(r[i], bool) for r in self.rows) and self.rows
                   for i in range(len(self.columns))]

        def line(vals):
            return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(vals, widths, numeric)).rstrip()

        out = [self.title] if self.title else []
        out += [line(self.columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
        return "\n".join(out)

    __repr__ = __str__

    def format(self, width: int | None = None) -> str:
        """The table as text at most `width` characters wide: the widest text columns are cut
        (ending in '…') until it fits; numbers are never cut."""
        if width is None:
            return str(self)
        cells = [[self._fmt(v) for v in r] for r in self.rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]
        numeric = [bool(self.rows) and all(isinstance(r[i], int) and not isinstance(r[i], bool) for r in self.rows)
                   for i in range(len(self.columns))]
        while sum(widths) + 2 * (len(widths) - 1) > width:
            cuttable = [i for i in range(len(widths)) if not numeric[i] and widths[i] > max(8, len(self.columns[i]))]
            if not cuttable:
                break
            i = max(cuttable, key=lambda j: widths[j])
            widths[i] = max(8, len(self.columns[i]), widths[i] - (sum(widths) + 2 * (len(widths) - 1) - width))

        def cut(v: str, w: int) -> str:
            return v if len(v) <= w else v[: w - 1] + "\u2026"

        def line(vals):
            return "  ".join(cut(v, w).rjust(w) if num else cut(v, w).ljust(w)
                             for v, w, num in zip(vals, widths, numeric)).rstrip()

        out = [cut(self.title, width)] if self.title else []
        out += [line(self.columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(self._fmt(v))}</td>" for v in r) + "</tr>"
                       for r in self.rows)
        cap = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
