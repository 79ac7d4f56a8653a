"""Tables that never cut what a user must copy, on any terminal width.

Rich shrinks a table that is wider than the terminal by cutting its cells
(``ft-4a5…``). Here each column says whether it may be cut: ids, statuses,
paths and amounts (``keep``) are never wrapped nor cut; the other columns
wrap, and on a terminal too narrow for all of them, the least important
ones (highest ``drop``) are left out, one at a time, until the rest fits.
(Rich's ``min_width`` alone does not do it: when a table cannot fit, rich
still shrinks every column evenly, kept ones included.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "fitted_table"]

_FOLD_WIDTH = 16
"""The narrowest a ``fold`` column gets: long words break across lines from there."""


@dataclass(frozen=True)
class Column:
    """One column of a :func:`fitted_table`.

    Attributes:
        header: The column's title.
        keep: Never wrap nor cut its values (ids, statuses, paths, amounts).
        drop: 0: always shown; otherwise, on a narrow terminal, columns with
            the highest ``drop`` are left out first.
        fold: Its values may break inside a word (a long filename) rather
            than push the column out.
        room: The width it gets (up to its longest value) before any droppable column
            is shown: a message or a filename wraps only once the extras are gone.
    """

    header: str
    keep: bool = False
    drop: int = 0
    fold: bool = False
    room: int = 0


def fitted_table(console: Console, columns: Sequence[Column],
                 rows: Sequence[Sequence[str | Text]]) -> Table:
    """A table of ``rows`` that fits ``console.width`` without cutting kept values.

    Each row has one cell per column, in the order of ``columns``. Where the kept
    columns and the wrapping ones at their narrowest still do not fit, once the
    droppable columns are gone, the wrapping ones break inside words, down to their
    header's width, and are then left out, last first: only a terminal narrower
    than the kept values alone cuts one.
    """
    cells = [[cell if isinstance(cell, Text) else Text(str(cell)) for cell in row] for row in rows]
    needs = [_need(column, [row[index] for row in cells]) for index, column in enumerate(columns)]
    shown = list(range(len(columns)))
    droppable = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop)

    natural = [_natural(column, [row[index] for row in cells])
               for index, column in enumerate(columns)]
    roomy = [max(need, min(column.room, width))
             for need, column, width in zip(needs, columns, natural, strict=True)]

    def excess(widths: list[int]) -> int:
        # Each column takes its width plus a space either side and one border.
        return sum(widths[i] + 3 for i in shown) + 1 - console.width

    def crowded(candidate: int) -> bool:
        # Whether the droppable column must go: the columns it yields to (more important:
        # a lower ``drop``) at their room, itself and the rest at their narrowest.
        rank = columns[candidate].drop
        return excess([roomy[i] if columns[i].drop < rank else needs[i]
                       for i in range(len(columns))]) > 0

    while droppable and crowded(droppable[0]):
        shown.remove(droppable.pop(0))
    _squeeze(columns, needs, shown, excess(needs))
    wrapping = [i for i in shown if not columns[i].keep]
    while wrapping and excess(needs) > 0:
        shown.remove(wrapping.pop())
    widths = _widths(columns, natural, needs, roomy, shown, console.width - 3 * len(shown) - 1)
    table = Table()
    for index in shown:
        column = columns[index]
        table.add_column(column.header, no_wrap=column.keep, min_width=needs[index],
                         width=widths.get(index), overflow="fold")
    for row in cells:
        table.add_row(*(row[index] for index in shown))
    return table


def _squeeze(columns: Sequence[Column], needs: list[int], shown: list[int], excess: int) -> None:
    """Narrow the shown wrapping columns by ``excess`` in all, widest first, none below its
    header (``needs`` is changed): their words then break rather than push a kept value out."""
    while excess > 0:
        wrapping = [i for i in shown if not columns[i].keep
                    and needs[i] > Text(columns[i].header).cell_len]
        if not wrapping:
            return
        widest = max(wrapping, key=lambda i: needs[i])
        needs[widest] -= 1
        excess -= 1


def _widths(columns: Sequence[Column], natural: list[int], needs: list[int], roomy: list[int],
            shown: list[int], room: int) -> dict[int, int]:
    """Fixed widths when the shown columns, unwrapped, are wider than ``room`` (the console's
    width less padding and borders); none when they fit.

    Rich would then shrink every column, kept ones too, by its own ratios, and on some
    widths cut a kept value or the table's right edge. Here kept columns get their whole
    values, and the room left is shared among the wrapping ones, each at least its longest
    word (its ``room`` where all of those fit), the rest in proportion to how much wider it
    would like to be.
    """
    if sum(natural[i] for i in shown) <= room:
        return {}
    wrapping = [i for i in shown if not columns[i].keep]
    floor = roomy if sum(roomy[i] for i in shown) <= room else needs
    widths = {i: floor[i] for i in shown}
    spare = room - sum(widths.values())
    wants = {i: natural[i] - widths[i] for i in wrapping}
    total = sum(wants.values())
    if spare > 0 and total > 0:
        for i in wrapping:
            widths[i] += spare * wants[i] // total
    return widths


def _natural(column: Column, values: list[Text]) -> int:
    """The column's width unwrapped: its header or its longest value."""
    return max([Text(column.header).cell_len, *(text.cell_len for text in values)])


def _need(column: Column, values: list[Text]) -> int:
    """The narrowest the column can be: whole values if kept, else its longest word.

    The header is never broken either ("Progres/s" reads badly).
    """
    header = Text(column.header).cell_len
    if column.keep:
        return max([header, *(text.cell_len for text in values)])
    longest = max([0, *(len(word) for text in values for word in text.plain.split())])
    return max(header, min(longest, _FOLD_WIDTH) if column.fold else longest)
