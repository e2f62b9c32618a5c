"""Report tables for a paper: booktabs LaTeX from a :class:`~cultura.evaluate.reportkit.Table` (or, for tables
kept only as CSV rows, from those rows).

What a researcher pastes: value and CI in one cell (``0.620 [0.250, 0.880]``, the HTML's text exactly), n in the
caption when every cell shares it (else an ``n`` column), n/a and ∞ with a table-note mark whose note gives the
reason (one mark per meaning), yes/no for truth values, a caption that names the measure and the seed table it
mirrors, and a width that fits: a table estimated to fit one column is a ``table``, a wider one a ``table*``;
one wider than a page (:data:`PAGE_PT`, the text width of a plain ``article``) is split into column blocks,
each repeating the leading label columns, so that no block is shrunk much (the file prints
``cultura-table: WIDTH in LINEWIDTH`` to the log, so a test can check the scale stays >= :data:`MIN_SCALE`).
A table of one column per country (seed 000 Table 8/12: a row per model × measure) whose split would take more
than two blocks is set with countries as rows instead, when that fits a page at :data:`MIN_SCALE` or more: a row
per country, a column per measure, each model's rows under its heading (16 countries: one block, not sixteen).
No float is estimated taller than a page (:data:`PAGE_HEIGHT_PT`): a table with more rows than a page holds is
cut into runs of rows, and the pieces (a block's columns, a run of rows) are stacked in one float while they fit; the rest go to further
floats under the same number captioned "(continued)", the label on the first and the notes on the last (a float
taller than TeX's largest dimension stops pdflatex with "Dimension too large").
Long text columns wrap (``p`` columns). Scripts pdflatex cannot set without extra fonts (CJK, Thai,
Devanagari, …) are left out with a note (``[Thai text]``; the CSV and the HTML have them) rather than written
as code points. The CSVs keep every column for machines.

Every table file starts with :func:`needs`, the packages it needs (``% needs: \\usepackage{...}``): it
compiles alone in ``\\documentclass{article}`` with those; :func:`document` wraps tables in a compilable
two-column article (``all-tables.tex`` beside them).
"""
from __future__ import annotations

import math
import unicodedata

from .reportkit import Cell, Table, merge_notes, note_mark

#: Unicode characters in captions, headers and cells, written so that pdflatex (utf8 input) needs no extra
#: package; anything else outside Latin is written as its code point.
_UNICODE = {"↑": r"$\uparrow$", "↓": r"$\downarrow$", "−": r"$-$", "–": "--", "—": "---", "…": r"\ldots{}",
            "→": r"$\rightarrow$", "←": r"$\leftarrow$", "↔": r"$\leftrightarrow$", "≥": r"$\geq$", "≤": r"$\leq$",
            "≈": r"$\approx$", "×": r"$\times$", "·": r"$\cdot$", "±": r"$\pm$", "∞": r"$\infty$",
            "²": r"\textsuperscript{2}", "³": r"\textsuperscript{3}", "†": r"\textdagger{}",
            "‡": r"\textdaggerdbl{}", "§": r"\S{}", "¶": r"\P{}", "‖": r"$\|$", "°": r"\textdegree{}", "’": "'",
            "‘": "`", "“": "``", "”": "''", "•": r"\textbullet{}", "✓": r"$\surd$", "≠": r"$\neq$",
            "√": r"$\surd$", "∑": r"$\sum$", "∈": r"$\in$", "∉": r"$\notin$", "⟨": r"$\langle$", "⟩": r"$\rangle$",
            "‰": r"\textperthousand{}", "\u00a0": "~", "\u2009": r"\,", "\u202f": r"\,", "★": r"$\star$",
            "☆": r"$\star$", "▲": r"$\triangle$"}
_GREEK = dict(zip("αβγδεζηθικλμνξπρστυφχψωΔΓΘΛΞΠΣΦΨΩ",
                  r"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau "
                  r"upsilon phi chi psi omega Delta Gamma Theta Lambda Xi Pi Sigma Phi Psi Omega".split()))
_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
            "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}", "<": r"\textless{}",
            ">": r"\textgreater{}", "|": r"\textbar{}"}

#: what every table file needs in its preamble (said in its first line, :func:`needs`)
PACKAGES = ("booktabs", "array", "graphicx")
#: the text width of a plain one-column article (10 pt, letter paper): the widest a block of a table may be
PAGE_PT = 345.0

#: the smallest scale a table is set at: a wider block is split (or its table set with countries as rows)
MIN_SCALE = 0.8

#: the text height of a plain article (10 pt, letter paper): what the blocks stacked in one float may fill
PAGE_HEIGHT_PT = 550.0

#: one column of a two-column paper (article, 10 pt: 229.5 pt; the estimate is in characters of \small)
ONE_COLUMN_PT = 229.0
_CHAR_PT = 4.6      # an average character of \small Computer Modern
_COLSEP_PT = 12.0   # 2 × \tabcolsep
_WRAP_CHARS = 36    # a text column longer than this wraps in a p column
_LINE_PT = 11.0     # a line of \small (its \baselineskip), one row of a tabular
_RULES_PT = 14.0    # the three booktabs rules of a block with their padding
_SKIP_PT = 12.0     # the \medskip between two blocks of a float
_ROOM = 0.8         # the share of a page the blocks may fill: the caption and the notes take the rest


def needs() -> str:
    """The first lines of a table file: the packages it needs and how to compile it alone."""
    return (f"% needs: \\usepackage{{{','.join(PACKAGES)}}}\n"
            "% compiles alone in \\documentclass{article} with the packages above (pdflatex, lualatex)\n")


#: the note of a table where text in another script was left out
LEFT_OUT = "Text in scripts pdflatex cannot set without extra fonts is left out here; the CSV and the HTML have it."


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    word = name.split(" ")[0] if name else "other"
    return {"CJK": "Chinese/Japanese", "HIRAGANA": "Japanese", "KATAKANA": "Japanese", "HANGUL": "Korean"}.get(
        word, word.capitalize())


def escape(text) -> str:
    """``text`` as LaTeX for pdflatex: specials escaped, common symbols as math, yes/no for truth values, a run
    of another script as ``[Thai text]`` (see :data:`LEFT_OUT`)."""
    if isinstance(text, bool):
        return "yes" if text else "no"
    out: list[str] = []
    run = None  # the script of the last run left out, while only spaces followed it
    for ch in str(text):
        other = not (ch in _SPECIAL or ch in _UNICODE or ch in _GREEK or ord(ch) < 0x250 or ch in "\n\t")
        if other:
            script = _script(ch)
            if script == run:  # the same run, across spaces: one mark
                while out and out[-1] == " ":
                    out.pop()
            else:
                out.append(f"\\textit{{[{script} text]}}")
            run = script
            continue
        if ch != " ":
            run = None
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ch in _GREEK:
            out.append(f"$\\{_GREEK[ch]}$")
        elif (ord(ch) < 0x250 and ch.isprintable()) or ch in "\n\t":
            out.append(ch)
        elif ord(ch) < 0x250:  # a control character: its code point, never a byte pdflatex chokes on
            out.append(f"\\textsc{{u+{ord(ch):04x}}}")
        else:
            out.append(ch)
    return "".join(out)


def _mark(i: int) -> str:
    return f"\\textsuperscript{{{escape(note_mark(i))}}}"


class _Notes:
    """Table notes: one mark per meaning (near-identical reasons share one note)."""

    def __init__(self, reasons: list[str]):
        self.groups = merge_notes(reasons)
        self.index = {r: i for i, (_, members) in enumerate(self.groups) for r in members}
        self.used: set[int] = set()

    def mark(self, reason: str | None) -> str:
        if not reason or reason not in self.index:
            return ""
        i = self.index[reason]
        self.used.add(i)
        return _mark(i)

    def latex(self) -> list[str]:
        return [f"{_mark(i)}\\,{escape(text)}" for i, (text, _) in enumerate(self.groups) if i in self.used]


def _cell_text(c, notes: _Notes) -> str:
    if isinstance(c, Cell):
        s = escape(c.text())
        if c.undefined:
            s += notes.mark(c.reason or ("not measured" if c.value is None else None))
        return s
    if isinstance(c, bool) or c in ("True", "False"):  # a Python truth value, also once printed
        return escape(c in (True, "True"))
    if isinstance(c, float) and not math.isfinite(c):
        return escape(Cell(c).text()) + notes.mark("no value" if math.isnan(c) else None)
    return escape("" if c is None else c)


def _plain_len(c) -> int:
    if isinstance(c, bool):
        return 3
    return len(c.text()) + (2 if isinstance(c, Cell) and c.undefined else 0) if isinstance(c, Cell) else \
        len(str("" if c is None else c))


class _Heading(list):
    """A row of the body that heads a group of rows (a model, in a transposed table): set across the table."""


def from_table(t: Table, *, caption: str | None = None, label: str = "") -> str:
    """A booktabs table of ``t``: the same texts as its HTML, notes for every n/a and ∞. A table of one column
    per country (:meth:`~cultura.evaluate.reportkit.Table.transposed`) is set with countries as rows when the
    split would take more than two blocks and the countries as rows fit a page at a scale of at least
    :data:`MIN_SCALE`; otherwise it is split."""
    as_is = _prepare(t, caption)
    flipped = t.transposed()
    if flipped is not None and len(_layout(*as_is[:4])[2]) > 2:
        alt = _prepare(flipped, caption if caption is not None else t.caption)
        if sum(_layout(*alt[:4])[0]) <= PAGE_PT / MIN_SCALE:
            return _render(*alt[:5], label, alt[5], limit=PAGE_PT / MIN_SCALE)
    return _render(*as_is[:5], label, as_is[5])


def _prepare(t: Table, caption: str | None):
    """What :func:`_render` sets: the columns, the body's LaTeX cells (group headings as :class:`_Heading`
    rows), each cell's plain length, the text columns, the caption and the notes."""
    reasons = [c.reason or ("not measured" if c.value is None else "") for row in t.rows for c in row
               if isinstance(c, Cell) and c.undefined]
    if any(isinstance(c, float) and math.isnan(c) for row in t.rows for c in row):
        reasons.append("no value")
    notes = _Notes([r for r in reasons if r])
    cols = list(t.columns)
    body = [[_cell_text(c, notes) for c in row] for row in t.rows]
    lens = [[_plain_len(c) for c in row] for row in t.rows]
    cap = caption if caption is not None else t.caption
    if t.n_column:
        ns = [t._n(row) for row in t.rows]
        if len(set(ns)) == 1 and ns[0]:
            cap = _with_n(cap, ns[0])
        elif any(ns):
            cols.append("n")
            for b, l_, n in zip(body, lens, ns):
                b.append(escape(n))
                l_.append(len(n))
    text_cols = [j for j in range(len(cols)) if not any(isinstance(row[j], Cell) for row in t.rows if j < len(row))]
    # a text column wraps only where its words are short enough to break between (a hash never wraps); a word
    # of 27 average characters (124 pt) sets inside the p column's 18 em (162 pt of \small): a comparison
    # such as 'openclip:cultura-tiny: high vs low' wraps instead of shrinking its block below 0.8
    words = [max([len(w) for row in t.rows if j < len(row) for w in str(row[j]).split()] + [0])
             if j < len(t.columns) else 0 for j in range(len(cols))]
    text_cols = [j for j in text_cols if words[j] <= _WRAP_CHARS * 0.75] + \
        [-1 - j for j in text_cols if words[j] > _WRAP_CHARS * 0.75]
    for i in sorted(t.headings, reverse=True):  # a heading takes a line but no column's width
        body.insert(i, _Heading([escape(t.headings[i])]))
        lens.insert(i, [0] * len(cols))
    return cols, body, lens, text_cols, cap, notes.latex()


def from_rows(rows: list[dict], *, caption: str, label: str = "") -> str:
    """A booktabs table of CSV-style rows (a measure column ``X`` with ``X ci_low``, ``X ci_high``, ``X n``,
    ``X reason`` becomes one cell with its CI; numbers to 3 decimals)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    parts = ("ci_low", "ci_high", "n", "reason")
    measures = [k for k in keys if any(f"{k} {p}" in keys for p in parts)]
    hidden = {f"{m} {p}" for m in measures for p in parts}
    bare = "value" in keys and "ci_low" in keys  # long format: value, ci_low, ci_high, n, reason
    if bare:
        measures.append("value")
        hidden |= set(parts)
        rows = [{**r, **{f"value {p}": r.get(p) for p in parts}} for r in rows]
        keys = keys + [f"value {p}" for p in parts]
    cols = [k for k in keys if k not in hidden and any(r.get(k) not in (None, "") for r in rows)]
    cells = []
    for r in rows:
        line = []
        for k in cols:
            if k in measures:
                n = _num(r.get(f"{k} n"))
                line.append(Cell(_num(r.get(k)), _num(r.get(f"{k} ci_low")), _num(r.get(f"{k} ci_high")),
                                 int(n) if isinstance(n, float) and math.isfinite(n) else None,
                                 str(r.get(f"{k} reason") or "") or None))
            else:
                v = r.get(k)
                x = _num(v) if isinstance(v, (float, int)) and not isinstance(v, bool) else v
                if isinstance(v, str) and v.strip().lower() in ("nan", "inf", "-inf", "infinity"):
                    x = float(v)
                line.append(Cell(x) if isinstance(x, float) else x)
        cells.append(line)
    return from_table(Table(cols, cells, caption=caption, n_column=any(f"{m} n" in keys for m in measures)),
                      label=label)


def _num(v):
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _with_n(cap: str, n: str) -> str:
    cap = cap.rstrip()
    if cap and not cap.endswith("."):
        cap += "."
    return f"{cap} n = {n} per cell.".strip()


def _blocks(keys: list[int], rest: list[int], est: list[float], limit: float) -> list[list[int]]:
    """The columns of each stacked block: the label columns ``keys`` then as many of ``rest`` as fit ``limit``."""
    base = sum(est[j] for j in keys)
    blocks: list[list[int]] = []
    cur: list[int] = []
    for j in rest:
        if cur and base + sum(est[k] for k in cur) + est[j] > limit:
            blocks.append(cur)
            cur = []
        cur.append(j)
    return [keys + b for b in blocks + [cur] if b] or [keys]


def _tabular(cols, body, spec, idx) -> list[str]:
    """One block: measured in a box, written to the log, shrunk only if LaTeX finds it wider than the line."""
    lines = ["\\setbox0=\\hbox{%", f"\\begin{{tabular}}{{{''.join(spec[j] for j in idx)}}}", "\\toprule",
             " & ".join(escape(cols[j]) for j in idx) + " \\\\", "\\midrule"]
    for i, row in enumerate(body):
        if isinstance(row, _Heading):
            lines.append(("\\addlinespace " if i else "")
                         + f"\\multicolumn{{{len(idx)}}}{{l}}{{\\textit{{{row[0]}}}}} \\\\")
        else:
            lines.append(" & ".join((row + [""] * (len(cols) - len(row)))[j] for j in idx) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}}%",
              "\\typeout{cultura-table: \\the\\wd0\\space\\space in \\the\\linewidth}%",
              "\\ifdim\\wd0>\\linewidth\\resizebox{\\linewidth}{!}{\\box0}\\else\\box0\\fi"]
    return lines


def _layout(cols, body, lens, text_cols, limit: float = PAGE_PT):
    """The estimated width of each column, its tabular spec and the columns of each block (the leading label
    columns, then as many others as fit ``limit``)."""
    unbreakable = {-1 - j for j in text_cols if j < 0}
    text_cols = [j for j in text_cols if j >= 0]
    widths = []
    for j, c in enumerate(cols):
        w = max([len(c)] + [l_[j] for l_ in lens if j < len(l_)])
        widths.append(min(w, _WRAP_CHARS) if j in text_cols else w)
    est = [w * _CHAR_PT + _COLSEP_PT for w in widths]
    spec = []
    for j, _ in enumerate(cols):
        full = max([len(cols[j])] + [l_[j] for l_ in lens if j < len(l_)])
        if j in text_cols and full > _WRAP_CHARS:
            spec.append(f">{{\\raggedright\\arraybackslash}}p{{{_WRAP_CHARS * 0.5:.0f}em}}")
        else:
            spec.append("l" if j in text_cols or j in unbreakable else "r")
    # the leading label columns (model, country, metric…) are repeated in every block of a split table
    labels = set(text_cols) | unbreakable
    keys = []
    for j in range(len(cols)):
        if j not in labels or j > 1:
            break
        keys.append(j)
    keys = keys or [0]
    # the estimate runs above the set width for digits (narrower than the average character) and below it for
    # headers of capitals and symbols (a Table 8 of the demo set 1.27 pages from an estimate under 1.15): blocks
    # are cut at the page's width, and LaTeX shrinks a block only if it really is wider (never below 0.8)
    blocks = (_blocks(keys, [j for j in range(len(cols)) if j not in keys], est, limit)
              if sum(est) > limit else [list(range(len(cols)))])
    return est, spec, blocks


def _render(cols, body, lens, text_cols, caption, label, notes, *, limit: float = PAGE_PT) -> str:
    est, spec, blocks = _layout(cols, body, lens, text_cols, limit)
    wide = sum(est) > ONE_COLUMN_PT
    env = "table*" if wide else "table"
    text = "\n".join(cell for row in body for cell in row) + escape(" ".join(cols) + " " + (caption or ""))
    if "text]}" in text:
        notes = notes + [escape(LEFT_OUT)]
    pieces, floats = _pages(cols, lens, spec, blocks, PAGE_HEIGHT_PT * _ROOM)
    # a split table may fill a page of its own: "p" lets LaTeX place it on a float page instead of deferring it
    place = "tp" if len(floats) > 1 else "t"
    # floats wait for a page to be placed (a file of floats alone places none before \\clearpage): LaTeX holds 18,
    # more stop it ("Too many unprocessed floats"), and each sends the output routine round once without a page
    # (100 such rounds stop TeX: "Output loop---100 consecutive dead cycles")
    n = len(floats)
    lines = [f"\\extrafloats{{{n}}}\\ifnum\\maxdeadcycles<{n + 100} \\maxdeadcycles={n + 100}\\fi"] if n > 1 else []
    for f, group in enumerate(floats):
        lines += [f"\\begin{{{env}}}[{place}]", "\\centering", "\\small"]
        for b, i in enumerate(group):
            if b:
                lines.append("\\par\\medskip")
            idx, rows = pieces[i]
            run = [body[r] for r in rows]
            # a run of rows cut from the middle of a group keeps the group's heading above it
            above = [body[r] for r in range(rows[0] if rows else 0) if isinstance(body[r], _Heading)]
            if rows and above and not isinstance(run[0], _Heading):
                run.insert(0, above[-1])
            lines += _tabular(cols, run, spec, idx)
        if notes and f == len(floats) - 1:
            lines.append("\\par\\smallskip{\\footnotesize\\raggedright\\sloppy " + "\\\\\n".join(notes) + "\\par}")
        if caption and f:  # a continuation keeps its table's number
            lines += [f"\\addtocounter{{{env.rstrip('*')}}}{{-1}}",
                      f"\\caption{{{escape(caption.rstrip().rstrip('.') + ' (continued).')}}}"]
        elif caption:
            lines.append(f"\\caption{{{escape(caption)}}}")
        if label and not f:
            lines.append(f"\\label{{{label}}}")
        lines.append(f"\\end{{{env}}}")
    return "\n".join(lines) + "\n"


def _pages(cols, lens, spec, blocks, room: float) -> tuple[list[tuple[list[int], list[int]]], list[list[int]]]:
    """The pieces of a table (a block's columns, a run of rows) and the pieces of each float, so that no float
    is estimated taller than ``room``: rows are cut where a block would not fit, then pieces stacked while they
    fit (a line per row, more where a wrapped ``p`` cell takes several)."""
    wrapped = [j for j, s in enumerate(spec) if s.startswith(">")]

    def lines(length: list[int]) -> int:
        return max([1] + [math.ceil(length[j] / _WRAP_CHARS) for j in wrapped if j < len(length)])

    head = _RULES_PT + _LINE_PT * lines([len(c) for c in cols])
    row_pt = [_LINE_PT * lines(l_) for l_ in lens]
    runs = _fill(row_pt, room - head, gap=0.0) or [[]]
    pieces = [(idx, rows) for rows in runs for idx in blocks]
    return pieces, _fill([head + sum(row_pt[r] for r in rows) for _, rows in pieces], room, gap=_SKIP_PT)


def _fill(heights: list[float], room: float, *, gap: float) -> list[list[int]]:
    """Indices of ``heights`` in order, grouped while a group (``gap`` between two) fits ``room``; one taller
    than ``room`` stands alone."""
    groups: list[list[int]] = []
    used = 0.0
    for i, h in enumerate(heights):
        if groups and used + gap + h <= room:
            groups[-1].append(i)
            used += gap + h
        else:
            groups.append([i])
            used = h
    return groups


def document(inputs: list[str]) -> str:
    """A two-column article that ``\\input``s every table file (compile with ``pdflatex all-tables.tex``)."""
    body = "\n".join(f"\\input{{{name}}}\n\\clearpage" for name in inputs)
    return ("\\documentclass[twocolumn]{article}\n\\usepackage[utf8]{inputenc}\n"
            f"\\usepackage{{{','.join(PACKAGES)}}}\n\\begin{{document}}\n" + body + "\n\\end{document}\n")
