"""A table with a column per country is shown with countries as rows once it has more countries than a screen shows
side by side (16 countries showed 8 at 1,400 px): one row per country, one column per measure, each model's rows
under its heading; the CSV keeps a column per country for machines."""
from __future__ import annotations

from html.parser import HTMLParser

from cultura.evaluate.reportkit import HTML_COUNTRIES, Cell, Table

SIXTEEN = ["AU", "BR", "CN", "DE", "EG", "FR", "GB", "IN", "JP", "KE", "MX", "NG", "RU", "TH", "US", "ZA"]
MODELS = ("openclip:ViT-B-32/openai", "mclip:XLM-R")
MEASURES = ("SP ↓", "TS", "IS")


def per_country(countries) -> Table:
    rows = [[m, x] + [Cell(round(0.1 + 0.01 * i + 0.3 * k + 0.1 * j, 3), 0.01, 0.99, n=120)
                      for i in range(len(countries))]
            for k, m in enumerate(MODELS) for j, x in enumerate(MEASURES)]
    rows[0][2] = Cell(None, reason="no trial for this country")
    return Table(["model", "metric"] + [f"{c} (n=120)" for c in countries], rows, caption="Table 12 shape.",
                 n_column=False)


class Rows(HTMLParser):
    """The table's rows as lists of cell texts, with the kind of each row (head, group, body)."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[str, list[str]]] = []
        self.where = "body"
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "thead":
            self.where = "head"
        elif tag == "tbody":
            self.where = "body"
        elif tag == "tr":
            self.rows.append(("group" if ("class", "group") in attrs else self.where, []))
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1][1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def parsed(html: str) -> list[tuple[str, list[str]]]:
    p = Rows()
    p.feed(html)
    return p.rows


def test_sixteen_countries_are_rows_of_the_html_with_a_column_per_measure():
    t = per_country(SIXTEEN)
    rows = parsed(t.html())
    assert rows[0] == ("head", ["country", *MEASURES])
    groups = [i for i, (kind, _) in enumerate(rows) if kind == "group"]
    assert [rows[i][1] for i in groups] == [[m] for m in MODELS]   # each model heads its rows once
    for k, g in enumerate(groups):
        body = rows[g + 1:g + 1 + len(SIXTEEN)]
        assert [cells[0] for _, cells in body] == [f"{c} (n=120)" for c in SIXTEEN]
        assert all(kind == "body" and len(cells) == 1 + len(MEASURES) for kind, cells in body)
        # every value of the table is in its country's row, under its measure
        for i, (_, cells) in enumerate(body):
            for j in range(len(MEASURES)):
                want = t.rows[k * len(MEASURES) + j][2 + i]
                assert cells[1 + j].startswith(want.text(with_ci=False)), (cells, want)
    assert "n/a†" in rows[groups[0] + 1][1][1] and "† no trial for this country" in t.html()
    assert len(rows) == 1 + len(MODELS) * (1 + len(SIXTEEN))


def test_the_markdown_shows_the_same_rows_and_the_csv_keeps_a_column_per_country():
    t = per_country(SIXTEEN)
    md = t.markdown()
    assert "| country | SP ↓ | TS | IS |" in md and md.count("| JP (n=120) |") == len(MODELS)
    assert all(f"| **{m}** |" in md for m in MODELS)
    csv = t.csv_rows()
    assert len(csv) == len(MODELS) * len(MEASURES) and "JP (n=120)" in csv[0] and csv.table is t


def test_a_table_of_as_many_countries_as_a_screen_shows_keeps_a_column_per_country():
    t = per_country(SIXTEEN[:HTML_COUNTRIES])
    rows = parsed(t.html())
    assert rows[0] == ("head", ["model", "metric"] + [f"{c} (n=120)" for c in SIXTEEN[:HTML_COUNTRIES]])
    assert not [kind for kind, _ in rows if kind == "group"]


def test_a_table_that_is_not_one_column_per_country_is_never_turned():
    cells = [Cell(0.5, 0.4, 0.6, n=10)] * 12
    tests = Table(["model", "country"] + [f"test {i}" for i in range(12)], [["m", "JP"] + cells])
    assert tests.transposed() is None and parsed(tests.html())[0][1][:2] == ["model", "country"]
    twice = per_country(SIXTEEN)
    twice.rows.append(list(twice.rows[0]))  # two rows with the same labels: turning it would lose one
    assert twice.transposed() is None and parsed(twice.html())[0][1][0] == "model"
