"""The planning report: pure fragments on hand-made data, one real report from the shared fit,
the CLI's exit codes, and the page rendered in headless Chromium."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecast import report as rp

# ----------------------------------------------------------------------------- pure pieces


def test_p_best_from_draws_counts_winners():
    draws = np.array([[0.5, 0.6, 0.1], [0.7, 0.6, 0.1], [0.2, 0.9, 0.1], [0.3, 0.4, 0.1]])
    np.testing.assert_allclose(rp.p_best_from_draws(draws), [0.25, 0.75, 0.0])
    with pytest.raises(ValueError, match="n_draws, n_recipes"):
        rp.p_best_from_draws(np.ones(3))


def test_default_budget_and_target():
    runs = pd.DataFrame({"compute": [1.0, 10.0, 250.0]})
    assert rp.default_budget(runs) == 1000.0
    # the budget the page uses is the one it prints, so a reader who copies it gets the same numbers
    for largest, budget in [(1.0198e12, 4.08e12), (16080.4, 64322.0), (0.01234, 0.0494)]:
        used = rp.default_budget(pd.DataFrame({"compute": [largest / 10, largest]}))
        assert used == budget and float(rp.fmt_compute(used).replace(",", "")) == used
    # median of the ceilings, rounded down to 0.01: about half the recipes reach it
    assert rp.default_target_from_asymptotes([0.58, 0.612, 0.70]) == 0.61


def test_default_budget_refuses_what_is_not_a_run_table_saying_what_it_takes():
    """default_budget("runs.csv") failed as "string indices must be integers", a table without its compute
    column as KeyError: 'compute', an empty one deep in fmt_compute, and compute as text ("1e3") was taken.
    Each is now refused saying what it takes: a run table, as load_runs gives it (load_runs takes the path)."""
    with pytest.raises(TypeError, match=r"^default_budget takes a run table \(a pandas DataFrame: load_runs\('runs\.csv'\), "
                                        r"or a fit's fc\.runs_\), got str 'runs\.csv'$"):
        rp.default_budget("runs.csv")
    with pytest.raises(ValueError, match=r"^default_budget reads the run table's column 'compute', which this table "
                                         r"lacks \(columns: metric\)$"):
        rp.default_budget(pd.DataFrame({"metric": [0.5]}))
    for compute in ([], ["1e3"], [float("nan")]):
        with pytest.raises(ValueError, match=r"^default_budget: column 'compute' must hold at least one compute > 0 "
                                             r"\(numbers, as load_runs reads them\)"):
            rp.default_budget(pd.DataFrame({"compute": compute}))


def test_default_budget_reads_a_table_load_runs_reads_and_names_the_type_of_one_it_refuses():
    """A polars DataFrame (or a pyarrow Table), which fit() and load_runs' validate_runs read through its
    to_pandas(), was refused by default_budget as "takes a run table (a DataFrame: ...), got DataFrame":
    refused for being what the message asked for. polars is not installed here, so a stand-in of its
    name that is not pandas plays it; the pyarrow Table is the real one."""
    pa = pytest.importorskip("pyarrow")

    class DataFrame:  # polars' own class name, in another module than pandas
        def __init__(self, columns):
            self.columns = columns

        def to_pandas(self):
            return pd.DataFrame(self.columns)

    assert rp.default_budget(DataFrame({"compute": [1.0, 250.0]})) == 1000.0
    assert rp.default_budget(pa.table({"compute": [1.0, 250.0]})) == 1000.0
    DataFrame.__module__, DataFrame.__qualname__ = "polars.dataframe.frame", "DataFrame"
    del DataFrame.to_pandas  # a table of a library without it: refused, naming which DataFrame it is
    with pytest.raises(TypeError, match=r"^default_budget takes a run table \(a pandas DataFrame: load_runs\('runs\.csv'\), "
                                        r"or a fit's fc\.runs_\), got polars\.dataframe\.frame\.DataFrame$"):
        rp.default_budget(DataFrame({"compute": [1.0, 250.0]}))


@pytest.mark.parametrize(
    "value, text",
    [(38400.0, "38,400"), (3.2e15, "3.2e15"), (1.25e7, "1.25e7"), (4e12, "4e12"), (float("inf"), "never"), (0.0, "0"), (2.5, "2.5"), (float("nan"), "–")],
)
def test_fmt_compute(value, text):
    assert rp.fmt_compute(value) == text


def test_fmt_prob_ends():
    assert rp.fmt_prob(0.001) == "<0.01"
    assert rp.fmt_prob(0.999) == ">0.99"
    assert rp.fmt_prob(1.0) == "1.00"
    assert rp.fmt_prob(0.4567) == "0.46"


def test_table_html_escapes_cells_but_not_raw_columns():
    rows = [{"name": "<b>x</b> & y", "bar": '<span class="bar"></span>', "v": 1.5}]
    out = rp.table_html(rows, [("name", "Name <1>"), ("bar", "bar"), ("v", "v")], numeric={"v"}, raw={"bar"})
    assert "&lt;b&gt;x&lt;/b&gt; &amp; y" in out
    assert "Name &lt;1&gt;" in out
    assert '<span class="bar"></span>' in out
    assert '<td class="num">1.5</td>' in out


def test_recipe_and_run_names_are_kept_on_one_line():
    # a browser breaks 'scalerl-lr1e-3' after 'lr1e-' in a narrow column unless told not to
    rows = [{"recipe": "scalerl-lr1e-3", "run_id": "scalerl-lr1e-3-s0", "other": "a-b"}]
    out = rp.table_html(rows, [("recipe", "recipe"), ("run_id", "run"), ("other", "other")])
    assert '<td class="name">scalerl-lr1e-3</td>' in out and '<td class="name">scalerl-lr1e-3-s0</td>' in out
    assert "<td>a-b</td>" in out
    assert re.search(r"td\.name[^{]*\{[^}]*white-space:\s*nowrap", rp.CSS)


def test_figure_html_is_an_inline_png():
    out = rp.figure_html(b"\x89PNG fake", alt='a "chart"', caption="c")
    assert 'src="data:image/png;base64,' in out
    assert 'alt="a &quot;chart&quot;"' in out


def test_convergence_banner_only_when_not_converged():
    assert rp.convergence_banner_html({"converged": True, "problems": []}) == ""
    banner = rp.convergence_banner_html({"converged": False, "problems": ["R-hat up to 1.2 <bad>"]})
    assert "did not converge" in banner and "&lt;bad&gt;" in banner


def test_diagnostics_name_the_sampler_tries_only_when_there_were_several():
    d = {"converged": True, "max_rhat": 1.005, "rhat_limit": 1.01, "min_ess_bulk": 742.0, "ess_limit": 200.0,
         "min_ess_tail": 580.0, "divergences": 0, "n_draws": 4000, "problems": []}
    assert "sampler tries" not in rp.diagnostics_html(d)
    tries = "divergences by try: 11 at target acceptance 0.9; 9 at 0.97; 0 at 0.97 with the recipe level non-centred (kept)"
    html = rp.diagnostics_html({**d, "sampling_tries": tries})
    assert "sampler tries" in html and "non-centred (kept)" in html


def test_diagnostics_name_the_runs_whose_end_falls_away_from_their_curve():
    d = {"converged": True, "max_rhat": 1.005, "rhat_limit": 1.01, "min_ess_bulk": 742.0, "ess_limit": 200.0,
         "min_ess_tail": 580.0, "divergences": 0, "n_draws": 4000, "problems": [], "misshapen_runs": []}
    assert "run shapes" not in rp.diagnostics_html(d)
    html = rp.diagnostics_html({**d, "misshapen_runs": [{"run_id": "dapo-s2", "recipe": "dapo", "late_trend_z": -4.4}]})
    assert "run shapes" in html and "dapo-s2 (z -4.4)" in html and "too narrow" in html
    # the row's label says what the terminal's 'shape:' prefix says: not twice ('run shapes: shape: the last ...')
    assert "<dt>run shapes</dt><dd>the last third of dapo-s2" in html


def test_diagnostics_show_r_hat_and_ess_as_their_problems_do():
    """R-hat 1.0104 and bulk ESS 149.6 against limits of 1.01 and 150: the page's diagnostics table and
    `forecast fit`'s header line said "max R-hat 1.010 (limit 1.01)" and "min bulk ESS 150", under a
    NOT CONVERGED status and beside the problems "R-hat up to 1.0104 (> 1.01)" and "bulk ESS as low
    as 149.6 (< 150)": one number, two values. Every surface now writes it as the problems do."""
    from forecast.inference import ConvergenceReport

    report = ConvergenceReport(max_rhat=1.0104, min_ess_bulk=149.6, min_ess_tail=150.4, divergences=0, n_draws=600,
                               ess_limit=150.0)
    head = str(report).splitlines()[0]
    assert "max R-hat 1.0104," in head and "min bulk ESS 149.6," in head and "min tail ESS 150," in head
    problems = " ".join(report.problems())
    assert "R-hat up to 1.0104 (> 1.01)" in problems and "bulk ESS as low as 149.6 (< 150)" in problems
    html = rp.diagnostics_html(report.to_dict())
    assert "1.0104 (limit 1.01)" in html and "149.6 (limit 150:" in html and "150 (the same limit)" in html
    fine = ConvergenceReport(max_rhat=1.0096, min_ess_bulk=150.4, min_ess_tail=900.0, divergences=0, n_draws=600,
                             ess_limit=150.0)
    assert "max R-hat 1.010," in str(fine) and "1.010 (limit 1.01)" in rp.diagnostics_html(fine.to_dict())  # not above it


def test_split_sentences_keeps_numbers_whole():
    text = "Scale 'a': expected 0.693 (90% interval 0.645-0.739), P(best) = 0.89. Runner-up 'b': 6.4e+04 gpu_hours. P(>= 0.6) = 0.9."
    assert rp.split_sentences(text) == [
        "Scale 'a': expected 0.693 (90% interval 0.645-0.739), P(best) = 0.89.",
        "Runner-up 'b': 6.4e+04 gpu_hours.",
        "P(>= 0.6) = 0.9.",
    ]
    rec = rp.recommendation_from_text(text, "test", extra=["Budget split: one run."])
    assert rec.headline.startswith("Scale 'a'") and rec.reasons[-1] == "Budget split: one run."


def test_a_recipe_name_with_a_full_stop_and_a_capital_is_not_split_as_a_sentence():
    """The report's headline is the recommendation's first sentence: a recipe named 'lr 3e-4. Big batch' cut it
    at "Scale 'lr 3e-4.", its numbers in the next 'sentence'. Names are kept whole, as quoted in the text."""
    names = ["lr 3e-4. Big batch", "S", "v1. Baseline"]
    text = ("Scale 'lr 3e-4. Big batch': expected 0.600, P(best) = 0.99. Runner-up 'v1. Baseline': expected 0.5. "
            "Scale 'S' later. S is not quoted here.")
    assert rp.split_sentences(text, names) == [
        "Scale 'lr 3e-4. Big batch': expected 0.600, P(best) = 0.99.",
        "Runner-up 'v1. Baseline': expected 0.5.",
        "Scale 'S' later.",
        "S is not quoted here.",
    ]
    assert rp.split_sentences(text)[0] == "Scale 'lr 3e-4."  # without the names, as before
    rec = rp.recommendation_from_text(text, "test", names=names)
    assert rec.headline == "Scale 'lr 3e-4. Big batch': expected 0.600, P(best) = 0.99."


def test_json_safe_turns_inf_and_nan_into_null():
    out = rp.json_safe({"a": np.float64(np.inf), "b": [np.nan, np.int64(3)], "c": np.bool_(True)})
    assert out == {"a": None, "b": [None, 3], "c": True}
    json.dumps(out, allow_nan=False)
    more = rp.json_safe({"na": pd.NA, "nat": pd.NaT, "set": {"b", "a"}, "zero_d": np.array(3.0), "zero_d_inf": np.array(np.inf)})
    assert more == {"na": None, "nat": None, "set": ["a", "b"], "zero_d": 3.0, "zero_d_inf": None}


def hand_made_report(*, converged=True, title="Plan <Q3>") -> rp.ReportData:
    """A ReportData without a fit: the renderer is a pure function of it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    png = rp.figure_png(fig)
    table = pd.DataFrame(
        {
            "recipe": ["a<script>", "b"],
            "p_best": [0.9, 0.1],
            "at_budget_q05": [0.5, 0.4], "at_budget_q50": [0.6, 0.5], "at_budget_q95": [0.7, 0.6],
            "at_budget_mean": [0.61, 0.49],
            "A_q05": [0.55, 0.45], "A_q50": [0.62, 0.52], "A_q95": [0.7, 0.6],
            "p_reach": [1.0, 0.2],
            "c_target_q05": [10.0, 100.0], "c_target_q50": [20.0, np.inf], "c_target_q95": [40.0, np.inf],
            "p_target": [1.0, 0.1],
        }
    )  # fmt: skip
    diagnostics = {
        "max_rhat": 1.002 if converged else 1.2, "min_ess_bulk": 900.0, "min_ess_tail": 800.0,
        "divergences": 0, "n_draws": 2000, "rhat_limit": 1.01, "ess_limit": 400.0,
        "converged": converged, "problems": [] if converged else ["R-hat up to 1.200 (> 1.01): chains disagree"],
    }  # fmt: skip
    provenance = {
        "inputs": ["runs.csv"], "n_runs": 4, "n_recipes": 2, "n_evaluations": 40, "compute_range": [1.0, 100.0],
        "compute_unit": "gpu_hours", "forecast_version": "0.0.test", "generated": "2025-01-01 00:00 UTC",
        "sampler": "nutpie", "random_seed": 0, "python": "3.11",
    }  # fmt: skip
    rec = rp.Recommendation("Scale a<script>", ["because <reasons>"], source="test")
    return rp.ReportData(
        title=title, budget=400.0, target=0.6, compute_unit="gpu_hours", recipe_table=table,
        recommendation=rec, diagnostics=diagnostics, provenance=provenance,
        figures={"fan_chart": png, "forest": png}, notes=["a note"],
    )  # fmt: skip


class _Tags(HTMLParser):
    """Counts tags and collects external references, to check structure without a browser."""

    def __init__(self):
        super().__init__()
        self.tags, self.external = {}, []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith(("data:", "#")):
                self.external.append(value)


def parse(page: str) -> _Tags:
    tags = _Tags()
    tags.feed(page)
    return tags


class _TableText(HTMLParser):
    """The text of each table, as a browser copies it (tags gone, entities decoded), by table id."""

    def __init__(self):
        super().__init__()
        self.tables, self._open = {}, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._open = dict(attrs).get("id") or f"table {len(self.tables)}"
            self.tables[self._open] = ""
        elif self._open and tag in ("td", "th"):
            self.tables[self._open] += "\t"

    def handle_endtag(self, tag):
        if tag == "table":
            self._open = None
        elif self._open and tag == "tr":
            self.tables[self._open] += "\n"

    def handle_data(self, data):
        if self._open:
            self.tables[self._open] += data


def tables_text(page: str) -> dict[str, str]:
    found = _TableText()
    found.feed(page)
    return found.tables


def test_render_report_from_hand_made_data():
    page = rp.render_report(hand_made_report())
    tags = parse(page)
    assert tags.tags["img"] == 2 and tags.tags["table"] >= 2
    assert tags.tags.get("script", 0) == 0 and tags.external == []  # opens offline, runs nothing
    assert "<script>" not in page.split("<style>")[1]  # user text is escaped everywhere
    assert "Plan &lt;Q3&gt;" in page and "a&lt;script&gt;" in page
    assert "convergence-warning" not in page
    for anchor in ("recommendation", "recipe-table", "fan-charts", "asymptotes", "compute-to-target", "diagnostics", "provenance"):
        assert f'id="{anchor}"' in page, anchor
    assert "never" in page  # an infinite compute-to-target is said in words


def test_render_report_without_a_target():
    data = hand_made_report()
    data.target = None
    data.recipe_table = data.recipe_table.drop(columns=["p_reach", "p_target", "c_target_q05", "c_target_q50", "c_target_q95"])
    page = rp.render_report(data)
    assert "No target given" in page and "compute to reach" not in page
    assert "P(best)" in rp.recipe_table_text(data)


def test_not_converged_fit_is_flagged_at_the_top():
    page = rp.render_report(hand_made_report(converged=False))
    banner = page.index('id="convergence-warning"')
    assert banner < page.index('id="recommendation"')
    assert "NOT CONVERGED" in page


def test_a_page_from_a_fast_fit_says_so_in_its_header(fitted, tmp_path):
    """`forecast report RUNS --fast` ("short chains: a quick look, not a decision") wrote a page whose
    recommendation read as any other, its mode named only in the provenance at the bottom, so a
    planner the page was forwarded to planned on a quick look. The header now says it."""
    data = hand_made_report()
    assert "quick look" not in rp.render_report(data)  # a full fit's page (and one from before the mode was kept)
    data.provenance["mode"] = "fast"
    data.settings = rp.COMMAND_SETTINGS  # as `forecast report` collects it
    header = rp.header_html(data)
    assert "fast fit (short chains): a quick look, not a decision; plan on a full fit (without --fast)" in header
    assert rp.collect_report(fitted, target=0.6).provenance["mode"] == fitted.mode == "fast"  # and in --json's provenance


def test_a_budget_far_from_the_data_is_a_banner_on_the_page_and_in_the_json():
    data = hand_made_report()
    assert 'id="budget-warning"' not in rp.render_report(data)
    data.warnings = ["The budget 1e9 is 1e7x the largest compute in the data (100 gpu_hours). Is the unit right?"]
    page = rp.render_report(data)
    assert page.index('id="budget-warning"') < page.index('id="recommendation"')
    assert "Is the unit right?" in page and rp.report_summary(data)["warnings"] == data.warnings


def test_the_datas_warnings_are_a_banner_of_their_own_on_the_page_and_in_the_json():
    """The data's warnings said when the fit read its runs reached the terminal only: the planner who
    reads the page days later never saw them. They are a banner near the top, escaped, and in the JSON."""
    data = hand_made_report()
    assert 'id="data-warning"' not in rp.render_report(data) and rp.report_summary(data)["data_warnings"] == []
    data.data_warnings = ["file runs.csv, column 'lr': differs between runs of recipe 'a<script>' (0.0005 in run 'a-s0', "
                          "0.001 in run 'a-s1'): give each setting its own recipe name"]
    page = rp.render_report(data)
    assert page.index('id="data-warning"') < page.index('id="recommendation"')
    assert 'class="banner warn" id="data-warning"' in page and "recipe &#x27;a&lt;script&gt;&#x27;" in page
    assert rp.report_summary(data)["data_warnings"] == data.data_warnings


def test_the_stop_summary_says_why_runs_continue():
    table = pd.DataFrame({
        "run_id": ["a", "b", "c", "d"], "recipe": ["r"] * 4,
        "decision": ["continue", "continue", "continue", "stop"],
        "rule": ["too_early", "too_early", "beats_best", "beats_best"], "reason": ["..."] * 4,
    })  # fmt: skip
    text = re.sub(r'<span class="name">([^<]*)</span>', r"\1", rp.stop_summary_html(table))
    assert "2 too early to judge" in text and "a, b" in text and "1 promising: c" in text


def test_the_stop_summary_keeps_each_run_name_on_one_line():
    """The summary lists runs in running text, where a browser broke 'scalerl-bs8-s1' after
    'scalerl-' (seen in Chromium at 400 px), as the tables' names no longer are."""
    table = pd.DataFrame({"run_id": ["scalerl-bs8-s1", "scalerl-g4-s0", "x<y"], "recipe": ["r"] * 3,
                          "decision": ["continue", "stop", "stop"], "rule": ["too_early", "beats_best", "beats_best"],
                          "reason": ["..."] * 3})
    text = rp.stop_summary_html(table)
    for name in ("scalerl-bs8-s1", "scalerl-g4-s0", "x&lt;y"):
        assert f'<span class="name">{name}</span>' in text
    assert "span.name" in rp.CSS and "x<y" not in text


def test_the_table_cites_the_mean_the_headline_cites():
    data = hand_made_report()
    page = tables_text(rp.render_report(data))["recipe-table"]
    assert "0.610 [0.500, 0.700]" in page and "0.610 [0.500, 0.700]" in rp.recipe_table_text(data)


def test_a_table_copied_from_the_page_has_plain_spaces_and_its_intervals_are_kept_whole_by_style():
    """The recipe table kept '[0.613, 0.638]' on one line with a non-breaking space (U+00A0): copied
    into a spreadsheet for a meeting, the space came along and the cells no longer parsed as numbers.
    Its intervals are kept whole by a style instead, and every table's text has only ASCII spaces."""
    data = hand_made_report()
    data.recipe_table[["c_target_q05", "c_target_q50", "c_target_q95"]] = [[1.23e12, 4.56e12, 9.1e12], [3.21e12, np.inf, np.inf]]
    page = rp.render_report(data)
    tables = tables_text(page)
    assert {"recipe-table", "compute-to-target-table"} <= set(tables)
    for name, text in tables.items():
        odd_spaces = sorted({hex(ord(c)) for c in text if c.isspace() and c not in " \t\n"})
        assert odd_spaces == [], f"{name}: {odd_spaces}"
    copied = tables["recipe-table"]
    assert "0.610 [0.500, 0.700]\t0.620 [0.550, 0.700]\t4.56e12 [1.23e12, 9.1e12]" in copied
    # each interval sits in a span that the stylesheet keeps on one line
    spans = re.findall(r'<span class="interval">([^<]*)</span>', page)
    assert spans[:3] == ["[0.500, 0.700]", "[0.550, 0.700]", "[1.23e12, 9.1e12]"] and len(spans) == 6
    assert re.search(r"span\.interval\s*\{[^}]*white-space:\s*nowrap", rp.CSS)


# ----------------------------------------------------------------------------- from a real fit


@pytest.fixture(scope="module")
def report_file(fitted, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    data = rp.write_report(fitted, path, target=0.6, inputs=["small_sweep.csv"])
    return path, data


def test_report_numbers_from_the_fit(fitted, report_file):
    _, data = report_file
    table = data.recipe_table
    assert sorted(table["recipe"]) == sorted(fitted.recipes)
    assert table["p_best"].sum() == pytest.approx(1.0)
    assert table["at_budget_mean"].is_monotonic_decreasing  # best expected metric first
    assert (table["at_budget_q05"] <= table["at_budget_q95"]).all()
    assert data.budget == pytest.approx(4 * fitted.runs_["compute"].max())
    # scalerl_scout_moe has the highest Table 1 asymptote (0.71 vs 0.61, 0.585)
    assert table.iloc[0]["recipe"] == "scalerl_scout_moe"
    assert data.synthetic and data.provenance["n_runs"] == 6
    assert data.warnings == []  # the default budget, 4x the data: nothing to flag
    chains, draws = fitted.idata.posterior.sizes["chain"], fitted.idata.posterior.sizes["draw"]
    assert data.provenance["sampler"].endswith(f"{chains} chains x {draws} draws")
    png = data.figures["fan_chart"]
    assert png.startswith(b"\x89PNG")


def test_a_data_warning_already_on_the_question_banner_is_not_said_twice(fitted, tmp_path):
    """The page's two banners, the question's and the data's, each say a sentence once: one the fit kept
    that the question's banner already says is left out of the data's."""
    import copy

    from forecast.data import far_from_data

    budget = 1e4 * fitted.runs_["compute"].max()
    far = far_from_data(budget, fitted.runs_["compute"], unit=fitted.compute_unit, name="The budget")
    fc = copy.copy(fitted)
    fc.data_warnings_ = [far, "file runs.csv, column 'lr': differs between runs of recipe 'a'"]
    data = rp.collect_report(fc, budget=budget, target=0.6)
    assert data.warnings == [far] and data.data_warnings == [fc.data_warnings_[1]]
    assert rp.render_report(data).count("Is the unit right?") == 1


def test_report_speaks_with_the_decision_and_stop_modules(fitted, report_file):
    _, data = report_file
    assert data.recommendation.source == "forecast.decisions"
    assert "scalerl_scout_moe" in data.recommendation.headline
    assert any(r.startswith("Budget split:") for r in data.recommendation.reasons)
    advice = data.stop_advice.table
    assert sorted(advice["run_id"]) == sorted(fitted.run_ids)
    assert set(advice["decision"]) <= {"stop", "continue"}
    assert data.notes == []


@pytest.mark.parametrize("top_p_best, split_ways, reconciled", [
    (0.5, 1, True),  # too close to call (run the leaders side by side) beside a split line keeping one run
    (0.95, 1, False),  # a clear winner: the headline suggests no side-by-side runs
    (0.5, 2, False),  # the split keeps two runs itself: nothing to reconcile
])
def test_a_split_line_keeping_one_run_says_why_beside_a_headline_too_close_to_call(
    fitted, monkeypatch, top_p_best, split_ways, reconciled
):
    """The page's headline said "Consider running 'a' and 'b' side by side" and the budget split line below it
    "Put the whole budget into one run of 'a'", with nothing to say the two answer different questions (which
    recipe leads; what this budget scores best with): a planner read it as advice that contradicts itself.
    The decisions' P(best) and split choice are set here, the rest is the fit's."""
    from forecast import decisions

    real_decide, real_split = decisions.decide, decisions.decide_split

    def decide(*args, **kwargs):
        decision = real_decide(*args, **kwargs)
        decision.table.loc[decision.table.index[0], "p_best"] = top_p_best
        return decision

    def decide_split(*args, **kwargs):
        split = real_split(*args, **kwargs)
        split.extra["recommended_ways"] = split_ways
        return split

    monkeypatch.setattr(decisions, "decide", decide)
    monkeypatch.setattr(decisions, "decide_split", decide_split)
    _, recommendation, _ = rp.scale_decision(fitted, 1e5, 0.6)
    split_line = next(r for r in recommendation.reasons if r.startswith("Budget split:"))
    assert ("side-by-side runs suggested above are for learning which recipe leads" in split_line) is reconciled
    assert rp.side_by_side_note(0.5, 1, 1, 4) == ""  # one recipe: nothing is run side by side
    assert rp.side_by_side_note(0.5, 3, 1, 1) == ""  # no split compared (every split left out)


def test_report_falls_back_without_the_decision_modules(fitted, monkeypatch):
    """A trimmed install without forecast.decisions/early_stop still gets a report, and says so."""
    full, _, _ = rp.scale_decision(fitted, 1e5, 0.6)
    monkeypatch.setitem(sys.modules, "forecast.decisions", None)  # import now raises ImportError
    monkeypatch.setitem(sys.modules, "forecast.early_stop", None)
    table, rec, notes = rp.scale_decision(fitted, 1e5, 0.6)
    assert "built-in" in rec.source and notes
    assert table["p_best"].sum() == pytest.approx(1.0)
    assert {"p_target", "c_target_q50", "A_q50", "at_budget_q50"} <= set(table.columns)
    # the same draws as `forecast decide`'s (a new run's true pass rate), so the same numbers
    columns = ["at_budget_q05", "at_budget_q50", "at_budget_q95", "p_target"]
    pd.testing.assert_frame_equal(table.set_index("recipe").loc[full["recipe"], columns].reset_index(),
                                  full[["recipe", *columns]], check_exact=False, atol=1e-12)
    advice, notes = rp.stop_advice(fitted, 1e5, 0.6)
    assert advice is None and "early_stop" in notes[0]


def test_written_report_is_self_contained(report_file):
    path, _ = report_file
    page = path.read_text(encoding="utf-8")
    tags = parse(page)
    assert tags.tags["img"] == 2 and tags.external == [] and tags.tags.get("script", 0) == 0
    assert "Synthetic data" in page and "scaling-forecast" in page
    assert not list(path.parent.glob(".*.tmp"))  # atomic write left nothing behind


def test_report_summary_is_strict_json(report_file):
    path, data = report_file
    text = json.dumps(rp.report_summary(data, path), allow_nan=False)
    assert json.loads(text)["recipes"][0]["recipe"] == data.recipe_table.iloc[0]["recipe"]


# ----------------------------------------------------------------------------- CLI


# decide --json's names -> report --json's, as the README's table gives them (written out here, not
# read from forecast.report, so a wrong mapping there fails)
README_JSON_NAMES = {
    "expected": "at_budget_mean", "q05": "at_budget_q05", "q50": "at_budget_q50", "q95": "at_budget_q95",
    "p_target": "p_target", "p_reach_ever": "p_reach",
    "compute_q05": "c_target_q05", "compute_q50": "c_target_q50", "compute_q95": "c_target_q95",
}


def test_cli_report_from_a_saved_fit(fitted, tmp_path, capsys):
    from forecast.cli import main

    fitted.save(tmp_path / "fit.nc")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path), "--target", "0.6", "--budget", "5e4", "-o", str(out), "--json", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["budget"] == 5e4 and summary["target"] == 0.6 and out.exists()
    assert summary["provenance"]["inputs"] == [f"{tmp_path} (saved fit)"]  # no summary.json beside it
    # the same numbers as decide --json, under the names the README's table gives
    assert main(["decide", str(tmp_path), "--target", "0.6", "--budget", "5e4", "--json"]) == 0
    decided = {row["recipe"]: row for row in json.loads(capsys.readouterr().out)["table"]}
    assert [row["recipe"] for row in summary["recipes"]] == list(decided)
    for row in summary["recipes"]:
        for decide_name, report_name in README_JSON_NAMES.items():
            theirs = decided[row["recipe"]][decide_name]
            if theirs is None or row[report_name] is None:  # a compute never reached is null in both
                assert theirs is None and row[report_name] is None, report_name
            else:
                assert row[report_name] == pytest.approx(theirs), report_name
        assert row["p_best"] == pytest.approx(decided[row["recipe"]]["p_best"])
    # a budget in the wrong unit: on the page, in the JSON and on stderr
    from forecast.io import dumps_json

    (tmp_path / "summary.json").write_text(dumps_json({"input": "runs.csv", "fit_info": fitted.fit_info_}))
    assert main(["report", str(tmp_path), "--budget", "1e12", "-o", str(out), "--json", "--no-progress"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert "Is the unit right?" in summary["warnings"][0] and captured.err.count("Is the unit right?") == 1
    assert 'id="budget-warning"' in out.read_text(encoding="utf-8")
    assert summary["provenance"]["inputs"] == ["runs.csv (fitted on)", f"{tmp_path} (saved fit)"]
    # a summary.json of another fit (`fit` stopped between its two files): its input is not this fit's
    (tmp_path / "summary.json").write_text(dumps_json({"input": "old.csv", "fit_info": {"mode": "other"}}))
    assert main(["report", str(tmp_path), "--budget", "5e4", "-o", str(out), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["provenance"]["inputs"] == [f"{tmp_path} (saved fit)"]


def test_cli_report_of_a_saved_fit_shows_the_datas_warnings_said_when_it_was_fitted(fitted, small_sweep, tmp_path, capsys):
    """`forecast fit` said on its terminal that a recipe's runs differ in a setting; `forecast report FIT`,
    run later by someone else, wrote a page and a JSON without a word of it."""
    from forecast.cli import main

    first = small_sweep["recipe"].iloc[0]
    lr = np.where((small_sweep["recipe"] == first) & small_sweep["run_id"].str.endswith("-s1"), 1e-3, 5e-4)
    small_sweep.assign(lr=lr).to_csv(tmp_path / "runs.csv", index=False)
    assert main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit"), "--fast", "--json", "--no-progress"]) == 0
    captured = capsys.readouterr()
    said = json.loads(captured.out)["data_warnings"]
    assert len(said) == 1 and f"file {tmp_path / 'runs.csv'}, column 'lr'" in said[0]
    assert captured.err.count("column 'lr'") == 1  # the terminal as before
    assert json.loads((tmp_path / "fit" / "summary.json").read_text())["data_warnings"] == said
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "fit"), "-o", str(out), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["data_warnings"] == said
    page = out.read_text(encoding="utf-8")
    assert 'id="data-warning"' in page and "column &#x27;lr&#x27;: differs between runs of recipe" in page


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "-3"], "--budget must be finite and > 0"),
        (["--budget", "inf"], "--budget must be finite and > 0, got inf"),
        (["--target", "1.5"], "--target must lie in (0, 1)"),
    ],
)
def test_cli_report_bad_input_exits_2(tmp_path, capsys, args, message):
    from forecast.cli import main

    runs = tmp_path / "runs.csv"
    runs.write_text("run_id,recipe,compute,metric\na,r,1,0.1\na,r,2,0.2\n")
    assert main(["report", str(runs), *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_report_refuses_to_overwrite_its_input(tmp_path, capsys):
    from forecast.cli import _read_as_input, main

    runs = tmp_path / "runs.csv"
    text = "run_id,recipe,compute,metric\na,r,1,0.1\na,r,2,0.2\n"
    runs.write_text(text)
    fit_dir = tmp_path / "fit"
    fit_dir.mkdir()
    (fit_dir / "fit.nc").write_bytes(b"not touched")
    assert main(["report", str(runs), "-o", str(runs), "--fast"]) == 2
    assert "is, or would become, an input read from" in capsys.readouterr().err and runs.read_text() == text
    assert main(["report", str(fit_dir), "-o", str(fit_dir / "fit.nc")]) == 2
    assert "is, or would become, an input read from" in capsys.readouterr().err
    assert (fit_dir / "fit.nc").read_bytes() == b"not touched"
    assert main(["backtest", str(runs), "--out", str(runs)]) == 2 and runs.read_text() == text
    # a folder of run logs reads only its logs: a result written beside them can be written again
    sweep = tmp_path / "sweep"
    (sweep / "a-s0").mkdir(parents=True)
    (sweep / "a-s0" / "evals.jsonl").write_text("")
    assert not _read_as_input(sweep / "backtest.json", sweep) and _read_as_input(sweep / "a-s0" / "evals.jsonl", sweep)
    # a folder of tables reads every table in it (.csv, .parquet, .pq, .jsonl): a CSV written there would
    # be read as runs next time; a .json is not read from a folder (configs, summaries), so may go there
    tables = tmp_path / "tables"
    tables.mkdir()
    assert _read_as_input(tables / "out.CSV", tables) and _read_as_input(tables / "more.jsonl", tables)
    assert not _read_as_input(tables / "backtest.JSON", tables) and not _read_as_input(tables / "report.html", tables)


def test_cli_report_missing_file_exits_2(tmp_path, capsys):
    from forecast.cli import main

    assert main(["report", str(tmp_path / "nope.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------------------- in a real browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make chromium installs it)")


def chromium(*args, timeout=60) -> subprocess.CompletedProcess:
    """Headless Chromium with console logging on stderr and every host unresolvable: a page that
    tried to fetch anything from the network would render broken."""
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--enable-logging=stderr", "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def console_messages(stderr: str) -> list[str]:
    """Lines the page logged to its console. The report has no scripts, so any line is an error."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def ink_and_band_share(png_path) -> tuple[float, float]:
    """(share of non-background pixels, share of pixels in the fan charts' 50% band colour).

    The 50% band (tab:blue at alpha 0.35 over the 90% band) is a colour nothing else on the page
    uses, so it is present only if the chart images were decoded and drawn."""
    import matplotlib.image as mpimg
    from matplotlib.colors import to_rgb

    rgb = mpimg.imread(png_path)[..., :3]
    blue = np.array(to_rgb("tab:blue"))
    band90 = 1 - 0.18 * (1 - blue)
    band50 = band90 * (1 - 0.35) + 0.35 * blue
    inked = 1 - np.all(rgb > 0.94, axis=-1).mean()
    band = np.all(np.abs(rgb - band50) < 0.04, axis=-1).mean()
    return float(inked), float(band)


@needs_chromium
def test_console_check_catches_a_broken_page(tmp_path):
    """The no-console-error check below is not vacuous: a page that errors is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); missingFunction();</script></body></html>')
    result = chromium("--dump-dom", bad.as_uri())
    messages = console_messages(result.stderr)
    assert any("boom" in m for m in messages) and any("missingFunction" in m for m in messages)


@needs_chromium
def test_report_renders_in_headless_chromium(report_file, tmp_path):
    path, data = report_file
    shot = tmp_path / "report.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1280,2400", path.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    assert console_messages(result.stderr) == []

    dom = chromium("--dump-dom", path.as_uri())
    assert console_messages(dom.stderr) == []
    tags = parse(dom.stdout)
    assert tags.tags.get("img") == 2 and tags.tags.get("table", 0) >= 2
    assert re.search(r'<table id="recipe-table">', dom.stdout)
    assert re.search(r'<table id="compute-to-target-table">', dom.stdout)
    assert dom.stdout.count('src="data:image/png;base64,') == 2
    for recipe in data.recipe_table["recipe"]:
        assert recipe in dom.stdout

    inked, band = ink_and_band_share(shot)
    assert inked > 0.05, "the screenshot is (almost) blank"
    # measured: ~0.003 with the charts drawn, ~0.000002 with the images blanked out
    assert band > 0.0005, f"the fan charts were not drawn ({band:.6f} of pixels in band colour)"


def test_page_image_is_decodable(report_file):
    """The inline PNGs decode (a browser shows a broken-image icon otherwise)."""
    import base64

    import matplotlib.image as mpimg

    path, _ = report_file
    for blob in re.findall(r'src="data:image/png;base64,([^"]+)"', path.read_text()):
        image = mpimg.imread(io.BytesIO(base64.b64decode(blob)), format="png")
        assert image.shape[0] > 100 and image.shape[1] > 100


def test_compute_to_target_names_medians_far_beyond_the_data():
    table = pd.DataFrame({"recipe": ["near", "far", "never"], "c_target_q50": [2e3, 5e5, np.inf]})
    sentence = rp.far_target_sentence(table, 1e3, "gpu_hours")
    assert "far 500,000" in sentence and "near" not in sentence and "never" not in sentence
    assert "100x the largest compute observed (1,000 gpu_hours)" in sentence
    assert rp.far_target_sentence(table, None, "gpu_hours") == ""
    assert rp.far_target_sentence(table.iloc[[0]], 1e3, "gpu_hours") == ""
    page = rp.render_report(hand_made_report())  # its medians (20, never) sit within 100x of 100
    assert "the curve's extrapolation" not in page and "100 per chain, for short chains a quarter of the draws but at least 100" in page


def test_compute_to_target_names_medians_below_the_data():
    """A target the first evaluations already pass gave a median compute of 4.69e8 where the smallest observed
    was 7.55e9, in both tables, with no word that it lies before the data (decide said nothing either)."""
    table = pd.DataFrame({"recipe": ["before", "within", "zero", "never"], "c_target_q50": [4.69e8, 2e10, 0.0, np.inf]})
    sentence = rp.before_data_target_sentence(table, 7.55e9, "flops")
    assert sentence == (" Medians below the smallest compute observed (7.55e9 flops) are the curve traced back, not "
                        "something the data show: before 4.69e8.")
    assert rp.before_data_target_sentence(table, None, "flops") == ""
    assert rp.before_data_target_sentence(table.iloc[1:], 7.55e9, "flops") == ""
    page = rp.render_report(hand_made_report())  # its medians (20, never) are within the data
    assert "the curve traced back" not in page


def test_a_target_chosen_for_the_page_stops_no_run_and_says_it_was_chosen(fitted):
    budget = 4 * float(fitted.runs_["compute"].max())
    asked, _ = rp.stop_advice(fitted, budget, 0.95)  # asked for: runs that cannot reach it stop on it
    assert (asked.table["rule"] == "reach_target").any()
    data = rp.collect_report(fitted, budget=budget, target=0.95, target_chosen=True)
    assert not (data.stop_advice.table["rule"] == "reach_target").any()
    assert "no target rule" in data.stop_advice.source
    assert rp.esc(rp.TARGET_CHOSEN_NOTE) in rp.header_html(data) and rp.report_summary(data)["target_chosen"] is True
    # nobody asked about the chosen target: the recommendation is about the budget alone
    said = " ".join([data.recommendation.headline, *data.recommendation.reasons])
    assert "reach 0.95" not in said and ">= 0.95" not in said
    asked = rp.collect_report(fitted, budget=budget, target=0.95)
    assert asked.recommendation.headline.startswith("No recipe is likely to reach 0.95")


def test_a_run_past_the_reports_budget_is_told_so_in_the_reports_terms(fitted):
    last = fitted.runs_.groupby("run_id")["compute"].max()
    budget = float(last.min())  # every run is at or past it
    advice, _ = rp.stop_advice(fitted, budget, None)
    reasons = advice.table.set_index("run_id")["reason"]
    assert (advice.table["rule"] == "budget_reached").all()
    assert all("at or past the report's budget" in reasons[run] for run in fitted.run_ids)


class LevelsFit:
    """A stand-in for a fit, for the report's stop advice without MCMC: run r's true pass rate at
    compute c is levels[r] + 0.05 log2(c), 1000 draws spread evenly 0.05 either side of it."""

    compute_unit = "flops"

    def __init__(self, levels: dict, last: dict):
        self.levels, self.run_ids = levels, list(levels)
        self.runs_ = pd.DataFrame([
            {"run_id": run, "recipe": run.rstrip("0123456789"), "compute": last[run] / 2**k, "metric": 0.5}
            for run in levels for k in range(4)  # 4 evaluations each: the rules' min_evals
        ])

    def run_stream(self, run_id):  # as the forecaster's: the stop advice draws each run from its own
        return 5000 + self.run_ids.index(run_id)

    def diagnostics(self):  # converged: no stop is judged on one chain's draws alone
        from types import SimpleNamespace

        return SimpleNamespace(converged=True)

    def sample_curves(self, compute, *, run_id, **_):
        mean = self.levels[run_id] + 0.05 * np.log2(np.asarray(compute, dtype=float))
        return mean[None, :] - 0.05 + 0.1 * (np.arange(1000)[:, None] + 0.5) / 1000


class UnconvergedLevelsFit(LevelsFit):
    """LevelsFit flagged as not converged, its 1000 draws 2 chains of 500: chain 1 the lower half of each
    run's spread, chain 2 the upper half, but for the runs in `upside_down`, whose chain 1 is their upper half."""

    chain_of_draw = np.repeat([0, 1], 500)

    def __init__(self, levels: dict, last: dict, upside_down=()):
        super().__init__(levels, last)
        self.upside_down = set(upside_down)

    def sample_curves(self, compute, *, run_id, **kw):
        draws = super().sample_curves(compute, run_id=run_id, **kw)
        return draws[::-1] if run_id in self.upside_down else draws

    def diagnostics(self):
        from types import SimpleNamespace

        return SimpleNamespace(converged=False, problems=lambda: ["R-hat up to 1.200 (> 1.01): chains disagree"])


def test_a_stop_on_a_fit_that_did_not_converge_says_beside_it_what_each_chain_alone_advises():
    """The page showed a red banner for a fit that did not converge and nothing beside each stop, so a planner
    could not tell a stop that rests on how the chains mix from one each chain alone makes (forecast watch and
    the trainer say it on the stop's line). Each stop on such a fit now carries the words in its row and in
    report --json's stop_advice (chains_say); a continue, a stop past the budget and a converged fit's stops
    none. The advice itself is unchanged."""
    # at the budget (1): the leaders near 0.70; far-s0 near 0.30; close-s0 near 0.625, its draws upside down, so
    # in chain 1 it is high where the leaders are low: P(beats best by 0.01) 0.15 in chain 1, 0 in chain 2, 0.075 pooled
    levels = {"lead-s0": 0.70, "lead-s1": 0.70, "far-s0": 0.30, "close-s0": 0.625, "done-s0": 0.5}
    last = {**dict.fromkeys(["lead-s0", "lead-s1", "far-s0", "close-s0"], 0.5), "done-s0": 2.0}  # done-s0: past it
    advice = rp.stop_advice(UnconvergedLevelsFit(levels, last, upside_down=["close-s0"]), 1.0, None)[0]
    table = advice.table.set_index("run_id")
    converged = LevelsFit(levels, last)
    converged.sample_curves = UnconvergedLevelsFit(levels, last, upside_down=["close-s0"]).sample_curves
    converged = rp.stop_advice(converged, 1.0, None)[0].table.set_index("run_id")
    pd.testing.assert_frame_equal(table.drop(columns="chains_say"), converged.drop(columns="chains_say"))
    assert converged["chains_say"].isna().all()
    assert table["decision"].to_dict() == {"done-s0": "stop", "close-s0": "stop", "far-s0": "stop",
                                           "lead-s0": "continue", "lead-s1": "continue"}
    assert table.loc["done-s0", "rule"] == "budget_reached" and table.loc["close-s0", "rule"] == "beats_best"
    assert table.loc["far-s0", "chains_say"] == ("each of its 2 chains alone says stop "
                                                 "(chain 1: beats_best 0 < 0.1; chain 2: beats_best 0 < 0.1)")
    assert table.loc["close-s0", "chains_say"] == ("its 2 chains alone disagree (chain 1 continue: beats_best 0.15 >= 0.1; "
                                                   "chain 2 stop: beats_best 0 < 0.1), so this advice rests on how they mix")
    assert table.loc[["lead-s0", "lead-s1", "done-s0"], "chains_say"].isna().all()
    rows = stop_table_rows(rp.stop_advice_html(advice))
    for run in ("far-s0", "close-s0"):
        assert f'<span class="chains-note">fit not converged: {rp.esc(table.loc[run, "chains_say"])}</span>' in rows[run]
    assert "chains-note" not in rows["lead-s0"] + rows["done-s0"]
    assert "chains-note" not in rp.stop_advice_html(rp.StopAdvice(converged.reset_index(), source="test"))
    records = {r["run_id"]: r for r in rp.json_safe(advice.table.to_dict(orient="records"))}
    assert records["close-s0"]["chains_say"] == table.loc["close-s0", "chains_say"] and records["lead-s0"]["chains_say"] is None


def test_runs_past_the_reports_budget_are_not_counted_among_the_runs_in_flight():
    """`forecast report <shipped sweep> --budget 5e11` counted its 9 runs past the budget as in
    flight: the stop cap (at most half of the runs in flight) became 10 of 21, and 8 of the 12 runs
    short of the budget were stopped on one forecast. A run past the budget has finished as far as
    the page's question goes: it is an alternative at what it reached, not a run in flight."""
    finished = {f"done{i}": 0.70 for i in range(1, 5)}  # at 2x the budget, far ahead
    short = {f"short{i}": 0.30 + 0.01 * i for i in range(1, 5)}  # at half the budget, far behind
    fc = LevelsFit({**finished, **short}, {**dict.fromkeys(finished, 2.0), **dict.fromkeys(short, 0.5)})
    advice = rp.stop_advice(fc, 1.0, None)[0].table.set_index("run_id")
    assert (advice.loc[list(finished), "rule"] == "budget_reached").all()
    assert all("at or past the report's budget" in advice.loc[run, "reason"] for run in finished)
    # half of the 4 runs in flight, the weakest first; the others are held for later
    assert list(advice.loc[list(short), "rule"]) == ["beats_best", "beats_best", "stop_cap", "stop_cap"]
    assert "2 of 4 runs in flight were already stopped" in advice.loc["short3", "reason"]
    # nor is a finished run the unfinished bar that the best run left beside it is kept for
    fc = LevelsFit({"done1": 0.70, "short1": 0.31}, {"done1": 2.0, "short1": 0.5})
    advice = rp.stop_advice(fc, 1.0, None)[0].table.set_index("run_id")
    assert advice.loc["short1", "rule"] == "beats_best" and advice.loc["short1", "decision"] == "stop"


# Appended before </body> of a copy of a page: lists every element that sticks out to the right of
# its section (or header, or banner), except inside a scrolling box, where that is intended. The
# page itself has no scripts; this one only measures the layout Chromium made of it.
OVERFLOW_PROBE = """<script>
window.addEventListener('load', () => {
  const out = [];
  for (const box of document.querySelectorAll('section, header, .banner')) {
    const right = box.getBoundingClientRect().right;
    for (const el of box.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > right + 1 && !el.closest('.scroll'))
        out.push((box.id || box.tagName) + ' ' + el.tagName + ' ' + Math.round(r.right - right) + 'px');
    }
  }
  out.push('page ' + document.documentElement.scrollWidth + ' of ' + document.documentElement.clientWidth);
  const pre = document.createElement('pre'); pre.id = 'overflow-probe'; pre.textContent = out.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


@needs_chromium
def test_a_narrow_window_keeps_every_section_within_its_card(tmp_path):
    """At a narrow window (a phone, a laptop's half screen) the page reflows instead of spilling:
    the wide tables scroll inside their cards, the charts shrink to the card, and a long input
    path wraps. Charts given a width (the forest plot had 640 px) kept it over the 100% cap and ran
    past their card; tables and the provenance path pushed the page wider than the window."""
    import matplotlib.pyplot as plt

    data = hand_made_report()
    fig, ax = plt.subplots(figsize=(9, 3))  # wider than a phone, like the report's charts
    ax.plot([0, 1], [0, 1])
    wide = rp.figure_png(fig)
    data.figures = {"fan_chart": wide, "forest": wide}
    data.provenance["inputs"] = ["/home/someone/experiments/2026-12-05_sweep_of_seven_recipes/runs_with_long_name.csv"]
    page = rp.render_report(data)
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", OVERFLOW_PROBE + "</body>"), encoding="utf-8")
    dom = chromium("--window-size=500,2000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="overflow-probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    lines = found.group(1).splitlines()
    shown, width = re.fullmatch(r"page (\d+) of (\d+)", lines[-1]).groups()
    assert lines[:-1] == [], "sticking out of their cards: " + "; ".join(lines[:-1])
    assert int(shown) <= int(width)


def three_panel_wide_png() -> bytes:
    """A chart drawn about as wide as the report's fan chart of 3 panels a row (1200-1250 px)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 3.5))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    return rp.figure_png(fig)


def test_a_chart_keeps_a_least_width_and_scrolls_in_its_box_on_screen_but_not_on_paper():
    """On a phone a fan chart of 3 panels a row was shrunk to the card (300 of its 1250 px) until no
    label could be read. It keeps CHART_LEAST_SCALE of its drawn width, inside a box that scrolls."""
    png = three_panel_wide_png()
    drawn = rp.png_width(png)
    assert drawn > 1000 and rp.png_width(b"not a png at all, but long enough") is None
    least = round(rp.CHART_LEAST_SCALE * drawn)
    html = rp.figure_html(png, "fan chart per recipe")
    assert re.search(rf'<div class="scroll"><img [^>]*style="--least-width:{least}px"', html), html[:80]
    assert "max-width:min(100%, 760px); --least-width:456px" in rp.figure_html(png, "cv", width=760)
    assert "min-width:var(--least-width" in rp.CSS
    printed = rp.CSS[rp.CSS.index("@media print"):]
    assert re.search(r"figure img \{[^}]*min-width:0", printed)  # paper does not scroll: the chart fits the page


def framed(page: str, width: int) -> str:
    """A page showing `page` in a frame `width` px wide, with CHART_PROBE run on it once both have
    loaded: headless Chromium lays out a --dump-dom page at no less than 500 px, and a phone is 390."""
    return ('<!DOCTYPE html><html><body style="margin:0">'
            f'<iframe id="window" style="border:0" width="{width}" height="2000" srcdoc="{rp.html.escape(page)}"></iframe>'
            + CHART_PROBE + "</body></html>")


# For each chart of the framed page: its drawn width, the width it is shown at, and the width of
# its box and of what the box scrolls; then the framed page's width against its window's.
CHART_PROBE = """<script>
window.addEventListener('load', () => {
  const doc = document.getElementById('window').contentDocument, out = [];
  for (const img of doc.querySelectorAll('figure img')) {
    const box = img.closest('.scroll');
    out.push([img.alt, img.naturalWidth, Math.round(img.getBoundingClientRect().width),
              box ? box.clientWidth : -1, box ? box.scrollWidth : -1].join('|'));
  }
  out.push('page|' + doc.documentElement.scrollWidth + '|' + doc.documentElement.clientWidth);
  const pre = document.createElement('pre'); pre.id = 'chart-probe'; pre.textContent = out.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


@needs_chromium
def test_on_a_phone_a_wide_chart_stays_readable_and_scrolls_while_a_wide_window_is_unchanged(tmp_path):
    """At 390 px (a phone) the fan chart of 3 panels a row was shown at a quarter of its size. Now it
    keeps at least CHART_LEAST_SCALE of it and scrolls sideways inside its card, while the page itself
    does not scroll; in a desktop window the chart fills its card as before, with nothing to scroll."""
    data = hand_made_report()
    data.figures = {"fan_chart": three_panel_wide_png(), "forest": data.figures["forest"]}
    page = rp.render_report(data)

    def charts_at(width):
        probe = tmp_path / f"probe{width}.html"
        probe.write_text(framed(page, width), encoding="utf-8")
        dom = chromium(f"--window-size={width + 100},2100", "--dump-dom", probe.as_uri())
        found = re.search(r'<pre id="chart-probe">(.*?)</pre>', dom.stdout, re.S)
        assert found, dom.stderr[-2000:]
        rows = [line.split("|") for line in found.group(1).splitlines()]
        page_width, window_width = map(int, rows.pop()[1:])
        assert window_width == width and page_width <= width, f"the page scrolls sideways at {width} px"
        return {alt: tuple(map(int, numbers)) for alt, *numbers in rows}

    drawn, shown, box, scrolled = charts_at(390)["fan chart per recipe"]
    assert shown >= rp.CHART_LEAST_SCALE * drawn - 1, (drawn, shown)
    assert box < shown <= scrolled, "the chart scrolls inside its box"
    drawn, shown, box, scrolled = charts_at(1280)["fan chart per recipe"]
    assert shown == min(drawn, box) and scrolled == box, (drawn, shown, box, scrolled)


def test_the_page_writes_compute_one_way(fitted):
    """Stop reasons and the far-budget banner write compute as the rest of the page does: the
    synthetic sweep's page said 'budget 64,320 gpu_hours' in its header and table and 'expected
    gain per doubling to 6.43e+04' in its stop advice, and the trainer sweep's '4e12' and '4e+12'."""
    from forecast.data import far_from_data
    from forecast.formatting import fmt_compute

    budget = 4 * float(fitted.runs_["compute"].max())
    advice, _ = rp.stop_advice(fitted, budget, 0.9)
    reasons = " ".join(advice.table["reason"])
    assert "e+" not in reasons and f" {fmt_compute(budget)} {fitted.compute_unit}" in reasons
    far = far_from_data(1e12, fitted.runs_["compute"], unit=fitted.compute_unit, name="The budget")
    assert "e+" not in far and far.startswith("The budget 1e12 is ")
    low = far_from_data(1.0, fitted.runs_["compute"], unit=fitted.compute_unit, name="The budget")
    assert f"({fmt_compute(fitted.runs_['compute'].min())} {fitted.compute_unit})" in low


def test_the_cross_validation_table_writes_a_mean_error_that_rounds_to_zero_without_a_sign_flip():
    metrics = pd.DataFrame([{"cut": 0.25, "reach": reach, "points": 10, "coverage": 0.9, "mean_error": error, "mae": 0.02,
                             "mae_least_squares": 0.04, "mae_last_value": 0.03}
                            for reach, error in (("all", -0.0004), ("final", 0.0123))])
    html = rp.honesty_html({"level": 0.9, "metrics": metrics, "summary": ["a sentence"]})
    assert "-0.000" not in html and "+0.000" in html and "+0.012" in html


def test_the_cross_validation_prose_names_the_errors_unit_as_its_chart_does():
    """The chart under the cross-validation table says "observed - forecast (metric)", as every chart
    of the page says "metric"; the prose beside it said "Errors are absolute, in pass rate."."""
    metrics = pd.DataFrame([{"cut": 0.25, "reach": "all", "points": 10, "coverage": 0.9, "mean_error": 0.01, "mae": 0.02,
                             "mae_least_squares": 0.04, "mae_last_value": 0.03}])
    html = rp.honesty_html({"level": 0.9, "metrics": metrics, "summary": ["a sentence"]})
    assert "Errors are absolute, in the metric's units" in html.replace("&#x27;", "'") and "pass rate" not in html


def test_cli_report_of_a_fast_fit_says_quick_look_on_the_terminal_as_its_page_does(fitted, tmp_path, capsys):
    """`forecast report RUNS --fast` said "a quick look, not a decision" in the page's header only: its
    terminal summary (stdout) printed the headline and table as a full fit's. It now prints the header's
    sentence under the headline; a full fit's page and summary say nothing of it."""
    from forecast.cli import main

    fitted.save(tmp_path / "fit.nc")  # the fixture's fit is a fast one, as --fast makes it
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html"), "--no-progress"]) == 0
    headline, quick_look = capsys.readouterr().out.splitlines()[:2]
    note = "fast fit (short chains): a quick look, not a decision; plan on a full fit (without --fast)"
    assert quick_look == note and note in rp.html.unescape((tmp_path / "r.html").read_text())
    assert rp.fast_fit_note(hand_made_report()) == ""  # a full fit's


def test_write_report_from_python_chooses_the_commands_target_and_names_keywords_not_flags(fitted, tmp_path):
    """write_report(fc, path) from Python wrote a page with no target (`forecast report` picks one) and
    pointed its reader at flags a function has not ("--budget sets one", "use --target"). It now picks
    the command's target, and the page names write_report's keyword arguments; the command's page
    still names its flags."""
    data = rp.write_report(fitted, tmp_path / "r.html")
    assert data.target == rp.default_target(fitted) and data.target_chosen
    page = rp.html.unescape((tmp_path / "r.html").read_text())
    assert f"({rp.TARGET_CHOSEN_NOTE}; target= sets one)" in page and "observed; budget= sets one)" in page
    assert "--budget" not in page and "--target" not in page
    assert "plan on a full fit (ScalingForecaster(mode='nuts'))" in page  # the fixture's fit is a fast one
    assert rp.write_report(fitted, tmp_path / "r.html", target=0.6).target_chosen is False
    unconverged = hand_made_report(converged=False)
    unconverged.target = None
    page = rp.html.unescape(rp.render_report(unconverged))
    assert "divergences call for ScalingForecaster(robust=True) or more data" in page
    assert "No target given (use target=)" in page and not re.search(r"--(budget|target|fast|robust)\b", page)
    unconverged.settings = rp.COMMAND_SETTINGS
    page = rp.render_report(unconverged)
    assert "divergences call for --robust or more data" in page and "No target given (use --target)" in page


def test_cli_report_says_on_the_terminal_which_budget_and_target_it_chose(fitted, tmp_path, capsys):
    """`forecast report RUNS -o r.html` printed a table with 'compute to 0.56' and 'P(>=0.56 at
    budget)' columns for a target nobody gave, without a word that the page chose it (the page's
    header says so, the terminal did not); a budget nobody gave was not named as chosen either."""
    from forecast.cli import main
    from forecast.formatting import fmt_compute

    fitted.save(tmp_path / "fit.nc")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path), "-o", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    target = rp.default_target(fitted)
    budget = rp.default_budget(fitted.runs_)
    assert f"target {target:g} ({rp.TARGET_CHOSEN_NOTE}; --target sets one)" in printed
    assert f"budget {fmt_compute(budget)} {fitted.compute_unit} (4x the largest compute observed; --budget sets one)" in printed
    assert main(["report", str(tmp_path), "-o", str(out), "--no-progress", "--budget", "5e4", "--target", "0.6"]) == 0
    printed = capsys.readouterr().out
    assert f"budget 50,000 {fitted.compute_unit}, target 0.6\n" in printed and "chosen" not in printed and "sets one" not in printed


def test_a_curve_that_starts_above_the_target_and_falls_below_it_is_explained_on_the_page_and_in_the_json():
    """A falling curve (A < R0) that starts above the target: compute to reach it 0 and P(ever
    reaches) 1.00 beside P(>= target at budget) 0.00, with no word of why (decide explains it)."""
    data = hand_made_report()
    table = data.recipe_table
    table["recipe"] = ["falls", "b"]
    table.loc[0, ["c_target_q05", "c_target_q50", "c_target_q95", "p_reach", "p_target"]] = [0.0, 0.0, 0.0, 1.0, 0.0]
    page = rp.render_report(data)
    section = page[page.index('id="compute-to-target"'):]
    assert ("'falls': its curve starts at or above 0.6 in the median draw (compute to reach it 0); it falls below "
            "0.6 by the budget (400 gpu_hours), so reaching it means starting there, and more compute does not "
            "bring it back.") in rp.html.unescape(section)
    assert "'b':" not in rp.html.unescape(section)  # an ordinary row needs no word
    # the table at the budget said "0 [0, 0]" with no word either, on the page and in the terminal
    recipes = tables_text(page)["recipe-table"]
    assert "0 [0, 0]: starts above it, falls below by the budget" in recipes
    text = rp.recipe_table_text(data)
    assert "0 [0, 0]: starts above it, falls below by the budget" in text and text.count("starts above") == 1
    notes = {r["recipe"]: r["target_note"] for r in rp.report_summary(data)["recipes"]}
    assert notes["b"] is None and notes["falls"].startswith("its curve starts at or above 0.6") \
        and "more compute does not bring it back" in notes["falls"]
    # a curve that starts above a target and stays there: said to start there, not to fall
    table.loc[0, "p_target"] = 0.95
    page = rp.html.unescape(rp.render_report(data))
    assert "'falls': its curve starts at or above 0.6 in the median draw (compute to reach it 0)." in page
    assert "falls below" not in page
    assert "0 [0, 0]: starts above it" in rp.recipe_table_text(data)
    data.target, data.recipe_table = None, table.drop(columns=["p_reach", "p_target", "c_target_q05", "c_target_q50", "c_target_q95"])
    assert "target_note" not in rp.report_summary(data)["recipes"][0]


def test_the_recipe_tables_note_says_what_never_means_for_the_compute_to_target():
    """It said "'never': at least that share of draws has its asymptote below the target", with no
    share named before it."""
    page = rp.html.unescape(rp.render_report(hand_made_report()))
    note = page[page.index('id="recipe-table"'):page.index('id="fan-charts"')]
    assert "that share" not in note
    assert ("'never' where so many draws have their asymptote below the target that the quantile is never "
            "reached (half of them for the median, 5% for the interval's upper end)") in note


PRINT_PROBE = """<script>
window.addEventListener('load', () => {
  // the page as paper shows it: its print rules applied to the screen of a page's width
  for (const sheet of document.styleSheets)
    for (const rule of [...sheet.cssRules])
      if (rule.media && rule.media.mediaText === 'print')
        for (const inner of [...rule.cssRules]) sheet.insertRule(inner.cssText, sheet.cssRules.length);
  const out = [];
  for (const box of document.querySelectorAll('.scroll'))
    if (box.scrollWidth > box.clientWidth + 1) {
      const inside = box.querySelector('table, img');
      out.push('problem: clipped ' + (inside.id || inside.alt) + ' ' + (box.scrollWidth - box.clientWidth) + 'px');
    }
  for (const img of document.querySelectorAll('img'))
    out.push('image ' + img.alt + ' ' + Math.round(img.getBoundingClientRect().height));
  // (a folded table still has a height when asked for one: whether it is shown is checkVisibility's)
  if (!document.getElementById('stop-table').checkVisibility()) out.push('problem: stop table folded');
  let intervals = 0;
  for (const cell of document.querySelectorAll('#recipe-table td')) {  // an interval on one line
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let text = walk.nextNode();
    while (text && text.data.indexOf('[') < 0) text = walk.nextNode();
    if (!text) continue;
    const end = text.data.indexOf(']');
    if (end < 0) { out.push('problem: interval split over text ' + cell.textContent); continue; }
    const range = document.createRange(); range.setStart(text, text.data.indexOf('[')); range.setEnd(text, end + 1);
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (lines.size > 1) out.push('problem: interval split over lines ' + text.data);
    intervals += 1;
  }
  out.push('intervals ' + intervals);
  const pre = document.createElement('pre'); pre.id = 'print-probe'; pre.textContent = out.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


@needs_chromium
def test_the_page_prints_every_column_every_chart_on_a_page_and_the_folded_table(tmp_path):
    """Printed (or saved as PDF for a meeting), the recipe table's scrolling box clipped its
    right-hand columns (P(>= target) was gone from the trainer sweep's page), a chart taller than a
    page was sliced through a row of panels, and the folded stop table printed as one line nobody
    can open; numbers wrapped to fit must not split an interval, and a chart held at its least width on
    a phone's screen must not be cut at the paper's edge. Paper is about 720 CSS px wide and 1000 high (A4 or Letter, default margins)."""
    import matplotlib.pyplot as plt

    data = hand_made_report()
    data.recipe_table["recipe"] = ["sweep2026_scalerl_longcontext_lr3e-4_bs512", "b"]
    data.recipe_table[["c_target_q05", "c_target_q50", "c_target_q95"]] = [[1.23e12, 4.56e12, np.inf], [3.21e12, np.inf, np.inf]]
    fig, ax = plt.subplots(figsize=(15, 25))  # a sweep of 24 recipes: 8 rows of 3 panels, 1250 px wide as drawn
    ax.plot([0, 1], [0, 1])
    data.figures = {"fan_chart": rp.figure_png(fig), "forest": data.figures["forest"]}
    runs = [f"run-{k}" for k in range(20)]  # more than a screen's worth: folded
    data.stop_advice = rp.StopAdvice(pd.DataFrame({"run_id": runs, "recipe": "b", "decision": "stop",
                                                   "rule": "beats_best", "reason": "stop: a reason"}), source="test")
    probe = tmp_path / "probe.html"
    probe.write_text(rp.render_report(data).replace("</body>", PRINT_PROBE + "</body>"), encoding="utf-8")
    dom = chromium("--window-size=720,1000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="print-probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    lines = found.group(1).splitlines()
    assert not [line for line in lines if line.startswith("problem:")], lines
    heights = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in lines}
    assert 0 < heights["image fan chart per recipe"] <= 900, heights
    assert heights["intervals"] == 6  # each row's metric, asymptote and compute to target was checked


@pytest.mark.parametrize("n, sizes", [(1, [1]), (7, [7]), (9, [9]), (10, [6, 4]), (19, [9, 6, 4]), (24, [9, 9, 6])])
def test_a_large_sweeps_fan_charts_are_split_into_images_of_a_page_each(n, sizes):
    """24 recipes made one image 8 rows of panels tall: printed, it was sliced through a row or
    shrunk to fit a page until unreadable. Images of at most 3 rows, shared out evenly, in order."""
    recipes = [f"r{k}" for k in range(n)]
    groups = rp.fan_chart_groups(recipes)
    assert [len(group) for group in groups] == sizes
    assert [recipe for group in groups for recipe in group] == recipes


def test_every_fan_chart_image_is_on_the_page_in_order_with_one_caption(fitted, monkeypatch):
    monkeypatch.setattr(rp, "FAN_CHART_COLUMNS", 1)  # the shared 3-recipe fit as a sweep of 3 pages
    monkeypatch.setattr(rp, "FAN_CHART_ROWS_PER_IMAGE", 1)
    figures = rp.fan_chart_figures(fitted, 4 * float(fitted.runs_["compute"].max()), 0.6, fitted.recipes)
    assert list(figures) == ["fan_chart", "fan_chart_2", "fan_chart_3"]
    data = hand_made_report()
    data.figures = {**figures, "forest": data.figures["forest"]}
    page = rp.render_report(data)
    section = page[page.index('id="fan-charts"'):page.index('id="asymptotes"')]
    shown = re.findall(r'alt="([^"]*)" src="data:image/png;base64,([^"]+)"', section)
    assert [alt for alt, _ in shown] == [f"fan chart per recipe, part {k} of 3" for k in (1, 2, 3)]
    assert [blob for _, blob in shown] == [rp.base64.b64encode(figures[key]).decode() for key in figures]
    assert section.count("<figcaption>") == 1 and section.rindex("<figcaption>") > section.rindex("<img")


def test_compute_to_target_lists_recipes_whose_median_is_never_likeliest_first():
    """'Fastest first', but the recipes whose median compute is never kept the table's order: on the
    trainer sweep at target 0.58, cispo (P(ever reaches) 0.32) above gspo (0.38)."""
    table = pd.DataFrame({"recipe": ["fast", "never-a", "never-b", "slow", "never-c"],
                          "c_target_q50": [10.0, np.inf, np.nan, 50.0, np.inf],
                          "c_target_q05": [5.0, 30.0, 20.0, 20.0, 25.0], "c_target_q95": [np.inf] * 5,
                          "p_reach": [0.9, 0.32, 0.38, 0.6, 0.38], "p_target": [0.8, 0.1, 0.1, 0.4, 0.1]})
    section = rp.compute_to_target_html(table, 100.0, "gpu_hours", 0.6)
    order = re.findall(r'<td class="name">([^<]+)</td>', section)
    assert order == ["fast", "slow", "never-b", "never-c", "never-a"]  # ties on P(ever reaches): the earlier 5% first


def write_trainer_run(sweep, run_id: str, last: float, *, stopped_by=None, finished=False) -> None:
    """A run folder as trainer_minimal writes it (the same file and field names), by hand: config.json,
    4 evaluations in evals.jsonl up to compute `last`, summary.json when it ended, and stopped.json
    when its own advisor (--advisor-every) stopped it with the message `stopped_by`."""
    folder = sweep / run_id
    folder.mkdir(parents=True)
    recipe, seed = run_id.rsplit("-s", 1)
    (folder / "config.json").write_text(json.dumps({"run_id": run_id, "recipe": recipe, "seed": int(seed),
                                                    "max_steps": 64, "eval_every": 16, "advisor_every": 1}))
    rows = [{"run_id": run_id, "recipe": recipe, "seed": int(seed), "compute": last / 2**k, "compute_unit": "flops",
             "metric": 0.5, "n_eval": 1200, "step": 16 * (4 - k)} for k in reversed(range(4))]
    (folder / "evals.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    if stopped_by is not None:
        advice = {"action": "stop", "rule": "reach_target", "message": stopped_by, "run_id": run_id,
                  "probability": 0.04, "value": 0.04, "threshold": 0.05, "details": {}}
        (folder / "stopped.json").write_text(json.dumps({"step": 64, "compute": last, "advice": advice}))
    if finished or stopped_by is not None:
        (folder / "summary.json").write_text(json.dumps({
            "run_id": run_id, "recipe": recipe, "seed": int(seed), "r0": 0.3, "final_metric": 0.5, "steps": 64,
            "compute": last, "device_seconds": 1.0, "world_size": 1, "stopped": stopped_by is not None}))


class SweepFolderFit(LevelsFit):
    """LevelsFit on the runs of a folder of trainer run logs, read as `forecast report DIR` reads them."""

    def __init__(self, levels: dict, folder):
        from forecast.data import load_runs

        self.levels, self.runs_ = levels, load_runs(folder)
        self.run_ids = sorted(self.runs_["run_id"].unique())


def test_runs_that_ended_in_a_trainer_sweep_are_not_advised_as_if_in_flight(tmp_path):
    """`forecast report SWEEP_DIR` on a sweep trained with --advisor-every advised the runs its
    advisor had already stopped (stopped.json), and the finished ones (summary.json), to continue or
    stop at a budget above where they ended, as if they were in flight. Each now says how it ended."""
    sweep = tmp_path / "sweep"
    reason = "stop: P(reaches 0.9 by 1.9e9) = 0.04 < 0.05"
    write_trainer_run(sweep, "weak-s0", 0.5, stopped_by=reason)
    write_trainer_run(sweep, "weak-s1", 0.5, finished=True)
    write_trainer_run(sweep, "good-s0", 0.5)  # in flight: no summary.json
    write_trainer_run(sweep, "good-s1", 0.5)
    levels = {"weak-s0": 0.30, "weak-s1": 0.31, "good-s0": 0.70, "good-s1": 0.69}
    advice = rp.stop_advice(SweepFolderFit(levels, sweep), 1.0, None)[0].table.set_index("run_id")
    assert advice.loc["weak-s0", "decision"] == "ended" and advice.loc["weak-s0", "rule"] == "advisor_stopped"
    assert "stopped by its own advisor at eval 4" in advice.loc["weak-s0", "reason"]
    assert reason in advice.loc["weak-s0", "reason"]
    assert advice.loc["weak-s1", "decision"] == "ended" and advice.loc["weak-s1", "rule"] == "finished"
    assert "finished at eval 4" in advice.loc["weak-s1", "reason"]
    assert set(advice.loc[["good-s0", "good-s1"], "decision"]) <= {"continue", "stop"}
    summary = re.sub(r'<span class="name">([^<]*)</span>', r"\1", rp.stop_summary_html(advice.reset_index()))
    assert "2 runs: 1 stopped by its own advisor: weak-s0; 1 finished: weak-s1" in summary
    assert list(advice["decision"]).index("ended") > max(i for i, d in enumerate(advice["decision"]) if d != "ended")
    # a stop recorded by a run killed before its summary.json stands (the trainer does not resume it)
    (sweep / "weak-s0" / "summary.json").unlink()
    advice = rp.stop_advice(SweepFolderFit(levels, sweep), 1.0, None)[0].table.set_index("run_id")
    assert advice.loc["weak-s0", "rule"] == "advisor_stopped"


def test_a_sweeps_runs_csv_and_its_saved_fit_say_which_runs_ended_as_its_folder_does(tmp_path):
    """`forecast report SWEEP_DIR` listed the runs that had ended (stopped.json, summary.json) as ended,
    but the same sweep read from its runs.csv, or from a fit saved from either, advised them to continue
    or stop at a budget above where they ended, as if in flight: a table said nothing of how runs
    ended. The folder's rows now carry an `ended` column, as the sweep's runs.csv does, and a saved
    fit's run table keeps it: the three read alike."""
    from forecast.data import load_runs
    from forecast.forecaster import run_table_dataset

    sweep = tmp_path / "sweep"
    write_trainer_run(sweep, "weak-s0", 0.5, stopped_by="stop: P(reaches 0.9 by 1.9e9) = 0.04 < 0.05")
    write_trainer_run(sweep, "weak-s1", 0.5, finished=True)
    write_trainer_run(sweep, "good-s0", 0.5)  # in flight: no summary.json
    write_trainer_run(sweep, "good-s1", 0.5)
    ended = {"weak-s0": "advisor_stopped", "weak-s1": "finished", "good-s0": "", "good-s1": ""}
    rows = [json.loads(line) for run in ended for line in (sweep / run / "evals.jsonl").read_text().splitlines()]
    pd.DataFrame(rows).assign(ended=lambda t: t["run_id"].map(ended)).to_csv(tmp_path / "runs.csv", index=False)
    levels = {"weak-s0": 0.30, "weak-s1": 0.31, "good-s0": 0.70, "good-s1": 0.69}

    def advice(runs):
        fc = SweepFolderFit(levels, tmp_path)  # any table: its runs_ is replaced
        fc.runs_ = runs
        return rp.stop_advice(fc, 1.0, None)[0].table.set_index("run_id").sort_index()

    from_folder = load_runs(sweep)
    # a saved fit's run table (ScalingForecaster.save): no _source, so no folder to look in
    saved = load_runs_from_dataset(run_table_dataset(from_folder), tmp_path / "fit.nc")
    for name, runs in [("runs.csv", load_runs(tmp_path / "runs.csv")), ("saved fit", saved)]:
        other = advice(runs)
        pd.testing.assert_frame_equal(other[["decision", "rule"]], advice(from_folder)[["decision", "rule"]], obj=name)
        assert other.loc["weak-s0", "decision"] == "ended" and other.loc["weak-s0", "rule"] == "advisor_stopped"
        assert "stopped by its own advisor at eval 4 (0.5 flops)" in other.loc["weak-s0", "reason"]
        assert other.loc["weak-s1", "rule"] == "finished" and "finished at eval 4" in other.loc["weak-s1", "reason"]
        assert set(other.loc[["good-s0", "good-s1"], "decision"]) <= {"continue", "stop"}
    # a table without the column (older runs.csv files) says nothing of how runs ended, as before
    assert rp.ended_runs(load_runs(tmp_path / "runs.csv").drop(columns="ended")) == {}


SHIPPED_TABLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*/*.csv"))


@pytest.mark.parametrize("path", SHIPPED_TABLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_shipped_sweeps_runs_ended_and_are_not_advised_as_if_in_flight(path):
    """`make demo` (and `forecast report examples/trainer_sweep/runs.csv`) advised the shipped sweep's
    21 runs, which had run their 640 steps long ago, at the page's budget (4x their compute): 12 to
    continue, 9 to stop, as if in flight. The shipped tables predated the `ended` column; every run in
    them ran its planned steps (or, simulated, all its evaluations), and each now says it finished, as
    a sweep's runs.csv does."""
    fc = SweepFolderFit({}, path)
    fc.levels = dict.fromkeys(fc.run_ids, 0.4)  # what a run in flight would be judged on
    budget = 4 * float(fc.runs_["compute"].max())  # the demo's default budget
    advice = rp.stop_advice(fc, budget, None)[0].table
    assert sorted(advice["run_id"]) == fc.run_ids
    assert (advice["decision"] == "ended").all() and (advice["rule"] == "finished").all(), advice
    summary = re.sub(r'<span class="name">([^<]*)</span>', r"\1", rp.stop_summary_html(advice))
    assert f"{len(fc.run_ids)} runs: {len(fc.run_ids)} finished" in summary


def test_runs_that_ended_short_of_the_budget_count_at_what_they_reached_in_the_typical_budget():
    """The stop advice's unit of compute (a typical run's budget: the gain-per-compute rule's unit and
    the extrapolation guard's reach) counted a run that had ended as if it had gone on to the budget.
    On a sweep whose runs ended at 0.1, two runs still in flight at 0.1 were held as 'too early' (the
    budget 1.0 is 10x their compute), though they had seen as much compute as their ended peers. An
    ended run counts at what it reached, as it is judged; the rules now judge the runs in flight."""
    done = {f"done-s{i}": 0.90 for i in range(3)}
    going = {"going-s0": 0.30, "going-s1": 0.31}
    fc = LevelsFit({**done, **going}, dict.fromkeys([*done, *going], 0.1))
    fc.runs_["ended"] = fc.runs_["run_id"].map(dict.fromkeys(done, "finished")).fillna("")
    advice = rp.stop_advice(fc, 1.0, None)[0].table.set_index("run_id")
    assert (advice.loc[list(done), "decision"] == "ended").all()
    assert "too_early" not in set(advice.loc[list(going), "rule"]), advice.loc[list(going), "reason"].tolist()
    assert "stop" in set(advice.loc[list(going), "decision"])  # 0.3 at the budget, beside runs that ended near 0.73


def stop_table_rows(page: str) -> dict[str, str]:
    """Each row of the stop advice table, by its run: the row's HTML."""
    table = page[page.index('id="stop-table"'):]
    table = table[:table.index("</table>")]
    rows = table.split("<tr>")[2:]  # after the header row
    return {re.search(r'<td class="name">([^<]*)</td>', row).group(1): row for row in rows}


def test_a_run_whose_end_falls_away_is_noted_beside_its_advice_and_one_that_ended_is_not():
    """Runs whose last third falls away from their fitted curve (forecast.shape_check: their forecasts
    are likely too high) were named only in the fit diagnostics, a section away from the advice to
    stop or continue them. A run advised now carries the note beside its advice: in its row's reason,
    in the summary above the table (folded for a long sweep) and in report --json's stop_advice. A run
    that ended (the table's ended column) has no advice, so no note. The advice itself is unchanged."""
    from forecast.shape_check import misshapen_run_note

    levels = {"going-s0": 0.30, "going-s1": 0.60, "gone-s0": 0.50}
    fc = LevelsFit(levels, dict.fromkeys(levels, 0.2))  # 5x short of the budget: the rules judge the forecasts
    fc.runs_["ended"] = np.where(fc.runs_["run_id"] == "gone-s0", "finished", "")
    flagged = [{"run_id": "gone-s0", "recipe": "gone-s", "late_trend_z": -6.3},
               {"run_id": "going-s0", "recipe": "going-s", "late_trend_z": -4.2}]  # worst first
    advice = rp.stop_advice(fc, 1.0, None, flagged)[0]
    table = advice.table.set_index("run_id")
    assert table.loc["going-s0", "rule"] == "runner_up"  # a held stop: its own rules judged its forecast
    assert table.loc["going-s0", "shape_note"] == misshapen_run_note(-4.2)
    assert "(z -4.2)" in table.loc["going-s0", "shape_note"] and table.loc["going-s0", "late_trend_z"] == -4.2
    # an ordinary continue; its closest check compares it with gone-s0, whose flag makes that P too low, not too high
    assert table.loc["going-s1", "rule"] == "beats_best" and table.loc["going-s1", "decision"] == "continue"
    assert pd.isna(table.loc["going-s1", "shape_note"]) and pd.isna(table.loc["going-s1", "late_trend_z"])
    assert table.loc["gone-s0", "decision"] == "ended" and pd.isna(table.loc["gone-s0", "shape_note"])
    unflagged = rp.stop_advice(fc, 1.0, None)[0].table
    pd.testing.assert_frame_equal(advice.table[unflagged.columns[:5]], unflagged[unflagged.columns[:5]])
    assert unflagged["shape_note"].isna().all()
    rows = stop_table_rows(rp.stop_advice_html(advice))
    assert misshapen_run_note(-4.2) in rows["going-s0"]
    assert "shape:" not in rows["going-s1"] and "shape:" not in rows["gone-s0"]
    summary = rp.stop_summary_html(advice.table)
    assert "shape: the last third of going-s0 (z -4.2) falls away" in summary and "gone-s0 (z" not in summary
    records = {r["run_id"]: r for r in rp.json_safe(advice.table.to_dict(orient="records"))}
    assert records["going-s0"]["shape_note"] == misshapen_run_note(-4.2)
    assert records["gone-s0"]["shape_note"] is None and records["gone-s0"]["late_trend_z"] is None
    json.dumps(records, allow_nan=False)
    # 10x short of the budget, too early for the rules: no forecast decides the continue, so no note
    # beside it (nor in the summary), which read as a doubt about it; the test's number stays in the row
    early = LevelsFit(levels, dict.fromkeys(levels, 0.1))
    early.runs_["ended"] = fc.runs_["ended"]
    table = rp.stop_advice(early, 1.0, None, flagged)[0].table
    going = table.set_index("run_id").loc["going-s0"]
    assert going["rule"] == "too_early" and pd.isna(going["shape_note"]) and going["late_trend_z"] == -4.2
    assert "shape:" not in rp.stop_advice_html(rp.StopAdvice(table, source="test"))


@pytest.mark.slow
def test_a_fitted_run_made_to_decline_is_noted_beside_its_advice_on_the_page(late_decline_fit, late_decline_sweep):
    """A run built to decline late, fitted: the page's stop advice notes it beside its advice, as its fit
    diagnostics name it (one test of the fit serves both), and no ordinary run."""
    import copy

    fc, (_, victim) = late_decline_fit, late_decline_sweep
    data = rp.collect_report(fc)
    flagged = data.diagnostics["misshapen_runs"]
    assert [row["run_id"] for row in flagged] == [victim]
    table = data.stop_advice.table.set_index("run_id")
    assert table.loc[victim, "decision"] in ("stop", "continue")
    assert table.loc[victim, "shape_note"].startswith("shape: its last third falls away from its fitted curve (z -")
    assert table.drop(index=victim)["shape_note"].isna().all()
    rows = stop_table_rows(rp.render_report(data))
    assert table.loc[victim, "shape_note"] in rows[victim]
    assert not any("shape:" in row for run, row in rows.items() if run != victim)
    summary = rp.report_summary(data)
    assert [r["run_id"] for r in summary["stop_advice"] if r["shape_note"]] == [victim]
    # the same run, ended (the table's ended column): no advice, no note; the diagnostics still name it
    ended = copy.copy(fc)
    ended.runs_ = fc.runs_.assign(ended=np.where(fc.runs_["run_id"] == victim, "finished", ""))
    data = rp.collect_report(ended)
    table = data.stop_advice.table.set_index("run_id")
    assert table.loc[victim, "decision"] == "ended" and table["shape_note"].isna().all()
    assert [row["run_id"] for row in data.diagnostics["misshapen_runs"]] == [victim]


def load_runs_from_dataset(dataset, path):
    """The run table as ScalingForecaster.load reads it back from the file save() wrote."""
    import xarray as xr

    from forecast.data import validate_runs

    dataset.to_netcdf(path)
    with xr.open_dataset(path) as back:
        table = back.load().to_dataframe().reset_index(drop=True)
    return validate_runs(table, source=path)


def test_saturated_runs_of_the_recipe_to_scale_are_not_read_as_dropping_it(fitted):
    """On a sweep whose runs have reached their plateau, every run was told to stop (the leader's
    as 'saturated') right under a recommendation to scale the leader: a planner read a
    contradiction. A saturated run's stop says that run has nothing left to gain at the budget, not
    'drop this recipe', and the page now says so beside both. The stop rules' numbers are unchanged."""
    data = rp.collect_report(fitted)  # the fixture's runs end on their plateaus (simulate_sweep)
    leader = data.recipe_table["recipe"].iloc[0]
    table = data.stop_advice.table
    saturated = table[(table["recipe"] == leader) & (table["rule"] == "saturated")]
    assert data.recommendation.headline.startswith(f"Scale '{leader}'") and (saturated["decision"] == "stop").all()
    assert len(saturated) == len(table[table["recipe"] == leader])  # the reproduction: every run of it stopped
    note = [r for r in data.recommendation.reasons if "saturated" in r]
    assert len(note) == 1 and f"'{leader}'" in note[0] and "not the recipe" in note[0]
    assert all(run in note[0] for run in saturated["run_id"])
    page = rp.render_report(data)
    stop_section = page[page.index('id="stop-advice"'):page.index('id="diagnostics"')]
    assert "nothing left to gain" in stop_section and "not that its recipe should be dropped" in stop_section
    assert "not the recipe" in page[page.index('id="recommendation"'):page.index('id="recipes"')]
    assert note[0] in rp.report_summary(data)["recommendation"]["reasons"]


def test_no_saturation_note_without_a_saturated_stop_of_a_recipe_the_recommendation_names():
    rec = rp.Recommendation("Scale 'a': ...", [], source="test")
    table = pd.DataFrame({"run_id": ["a-s0", "b-s0", "ab-s0"], "recipe": ["a", "b", "ab"], "decision": ["continue", "stop", "stop"],
                          "rule": ["leader", "saturated", "saturated"], "reason": ["..."] * 3})
    assert rp.saturated_stops_note(table, rec) is None  # 'b' and 'ab' are not named; 'a' is not saturated
    assert "nothing left to gain" not in rp.stop_advice_html(rp.StopAdvice(table.iloc[:1], source="test"))
    assert "nothing left to gain" in rp.stop_advice_html(rp.StopAdvice(table, source="test"))


def test_the_stop_section_says_what_a_gain_per_compute_reason_counts_when_a_reason_cites_it():
    """Every advised run's reason cited "expected gain over the best of 4 other run(s) = 0.0014 for 0.78 typical
    budgets of compute left = 0.0018 per budget < 0.002", and nothing on the page said what a typical budget
    is or what the gain is over. The reason here is worded by forecast.early_stop itself."""
    from forecast.early_stop import _describe

    check = {"rule": "gain_per_compute", "value": 0.0018, "threshold": 0.002, "fired": True, "compute_left": 0.78,
             "gain": 0.0014, "n_alternatives": 4}
    reason = "stop: " + _describe(check, "gpu_hours")
    assert rp.GAIN_PER_COMPUTE_WORDS in reason
    table = pd.DataFrame([
        {"run_id": "weak-s0", "recipe": "weak", "decision": "stop", "rule": "gain_per_compute", "reason": reason},
        {"run_id": "good-s0", "recipe": "good", "decision": "continue", "rule": "too_early",
         "reason": "continue: planned budget is 14.1x the compute so far > 8x; rules start below"},
    ])
    said = "per typical budget of compute it still needs (a typical budget: the median of the compute the runs are judged at"
    assert said in rp.stop_advice_html(rp.StopAdvice(table, source="test"))
    assert said not in rp.stop_advice_html(rp.StopAdvice(table.iloc[1:], source="test"))  # no reason cites it


def test_the_stop_section_does_not_say_ended_runs_are_compared_at_the_budget():
    """The stop section said 'Each is compared with every other run at the budget' while its note
    on ended runs, a few lines below, said the runs in flight are compared with them at what they
    reached (recommend_runs' compare_at for a run it is not asked about): the page contradicted itself."""
    table = pd.DataFrame([
        {"run_id": "good-s0", "recipe": "good", "decision": "continue", "rule": "promising", "reason": "continue"},
        {"run_id": "weak-s0", "recipe": "weak", "decision": "ended", "rule": "finished",
         "reason": "not advised: finished at eval 4 (0.5) (summary.json)"},
    ])
    page = rp.stop_advice_html(rp.StopAdvice(table, source="test"))
    assert "every other run at the budget" not in page
    assert "at or past the budget or that ended at what it reached" in page


def test_p_ever_reaches_is_said_to_be_a_new_runs_asymptote_not_the_asymptote_column(fitted):
    """The recipe table's asymptote is the recipe's A (a typical run), while P(ever reaches) counts a
    new run's own asymptote, which spreads around A by the seed-to-seed spread. The page said "the
    share of draws whose asymptote lies above the target", so beside dapo's asymptote 0.601 [0.531,
    0.705] (every draw above 0.5) it read P(ever reaches 0.5) 0.98 as a contradiction (grpo: 0.77
    where its A is above 0.5 in 84% of draws). Both numbers are right; the page now says which is which."""
    target = 0.6
    recipe = fitted.recipes[0]
    p_reach = fitted.compute_to_target(target).set_index("recipe").loc[recipe, "p_reach"]
    new_run = fitted.curve_parameters(recipe=recipe, kind="new_run", rng=fitted.recipe_stream(recipe))
    assert p_reach == pytest.approx(np.mean((new_run["A"] > target) | (new_run["R0"] >= target)))  # what the words say
    table = pd.DataFrame({"recipe": ["a"], "c_target_q50": [10.0], "c_target_q05": [5.0], "c_target_q95": [np.inf],
                          "p_reach": [0.9], "p_target": [0.8], "p_best": [1.0], "at_budget_mean": [0.6],
                          "at_budget_q05": [0.5], "at_budget_q95": [0.7], "A_q05": [0.55], "A_q50": [0.6], "A_q95": [0.65]})
    words = re.sub(r"<[^>]+>", "", rp.compute_to_target_html(table, 100.0, "gpu_hours", target))
    assert "a new run's own asymptote" in words and "asymptote column" in words
    words = re.sub(r"<[^>]+>", "", rp.recipe_table_html(table, 100.0, "gpu_hours", target))
    assert "typical run" in words


def test_a_run_stopped_against_a_run_whose_end_falls_away_is_told_its_forecast_is_likely_too_high():
    """short1 is stopped on P(beats best 'done1'); done1's last third falls away from its curve, so the
    bar short1 lost to is likely too high. Its reason says so, as forecast watch's and the trainer's
    advice do; the summary above the table names the flagged run alone, not short1; the advice is unchanged."""
    fc = LevelsFit({"done1": 0.70, "short1": 0.31}, {"done1": 2.0, "short1": 0.5})
    flagged = [{"run_id": "done1", "recipe": "done", "late_trend_z": -5.04}]
    advice = rp.stop_advice(fc, 1.0, None, flagged)[0]
    table = advice.table.set_index("run_id")
    assert (table.loc["short1", "decision"], table.loc["short1", "rule"]) == ("stop", "beats_best")
    assert table.loc["short1", "shape_note"] == ("shape: the run it is compared with, 'done1', falls away from its "
                                                 "curve (z -5.0): its forecast is likely too high")
    assert pd.isna(table.loc["short1", "late_trend_z"])  # its own end is not in question
    # past the budget, flagged itself: its stop reads no forecast, so the number and no note
    assert pd.isna(table.loc["done1", "shape_note"]) and table.loc["done1", "late_trend_z"] == -5.04
    unflagged = rp.stop_advice(fc, 1.0, None)[0].table
    pd.testing.assert_frame_equal(advice.table[unflagged.columns[:5]], unflagged[unflagged.columns[:5]])
    assert rp.esc(table.loc["short1", "shape_note"]) in stop_table_rows(rp.stop_advice_html(advice))["short1"]
    summary = rp.stop_summary_html(advice.table)
    assert "shape:" not in summary  # no run's own note is beside its advice below


def test_the_fan_charts_caption_says_extrapolated_to_the_budget_only_beyond_the_data():
    """`forecast report FIT --budget 1e10` on the shipped sweep (data 6.05e9 to 1.02e12 flops) captioned its
    fan charts '... extrapolated to the budget 1e10 flops (dashed)', though the charts run to the data's end
    and the budget lies within it. Beyond the data the caption is as before."""
    figures = {"fan_chart": b"not a png"}
    within = rp.figures_html(figures, 1e10, "flops", 0.6, 1.02e12)
    assert "extrapolated to the budget" not in within
    assert "drawn to the largest compute observed (1.02e12 flops), the budget 1e10 flops dashed, target 0.6" in within
    beyond = rp.figures_html(figures, 4.08e12, "flops", 0.6, 1.02e12)
    assert "extrapolated to the budget 4.08e12 flops (dashed), target 0.6 as the red dash-dot line" in beyond


def test_budget_table_gives_the_quantiles_it_names_and_counts_a_draw_at_the_target_as_reaching_it():
    """The table's numbers from draws whose answers are known: 21 evenly spaced draws of 'a' (0.40 to
    0.60) give q05 0.41, q50 0.50, q95 0.59 and mean 0.50; 'b' lies 0.01 under 'a' in every draw, so
    P(best) is 1 and 0. P(>= target) counts a draw exactly at the target, as its name says."""
    a = np.linspace(0.40, 0.60, 21)
    table = rp.budget_table(["a", "b"], np.column_stack([a, a - 0.01]), target=None).set_index("recipe")
    assert list(table["p_best"]) == [1.0, 0.0]
    np.testing.assert_allclose(table.loc["a", ["at_budget_q05", "at_budget_q50", "at_budget_q95", "at_budget_mean"]],
                               [0.41, 0.50, 0.59, 0.50], atol=1e-12)
    exact = np.array([[0.25], [0.5], [0.5], [0.75]])  # binary fractions: no rounding at the target
    assert rp.budget_table(["a"], exact, target=0.5)["p_target"].tolist() == [0.75]


def built_in_table(p_best) -> pd.DataFrame:
    """A recipe table as builtin_recipe_table makes it, recipes 'a', 'b', ... with the given P(best)."""
    n = len(p_best)
    return pd.DataFrame({
        "recipe": [chr(ord("a") + k) for k in range(n)], "p_best": p_best,
        "at_budget_mean": [0.6] * n, "at_budget_q05": [0.5] * n, "at_budget_q50": [0.6] * n, "at_budget_q95": [0.7] * n,
        "A_q05": [0.55] * n, "A_q50": [0.62] * n, "A_q95": [0.7] * n, "p_target": [0.9] * n,
    })  # fmt: skip


def test_the_built_in_rule_argues_from_the_likeliest_best_recipe_down_and_calls_p_best_0_8_clear():
    """The fallback recommendation (no forecast.decisions): the recipe likeliest to be best first, a
    P(best) of 0.80 a clear winner (CLEAR_WINNER: 'at or above'), the three likeliest recipes as reasons."""
    rec = rp.builtin_recommendation(built_in_table([0.04, 0.10, 0.80, 0.06]), 400.0, "gpu_hours", 0.6)
    assert rec.headline == "Scale c: P(best at 400 gpu_hours) = 0.80"
    assert [reason.split(":")[0] for reason in rec.reasons] == ["c", "b", "d"]
    assert rec.reasons[0] == ("c: metric at budget 0.600 [0.500, 0.700], asymptote 0.620 [0.550, 0.700], "
                              "P(>= 0.6 at budget) = 0.90")
    rec = rp.builtin_recommendation(built_in_table([0.04, 0.17, 0.79]), 400.0, "gpu_hours", None)
    assert rec.headline == ("No clear winner at 400 gpu_hours: c (P(best) 0.79) vs b (0.17); more seeds or compute "
                            "before committing")


def test_the_fallback_table_lists_the_likeliest_best_recipe_first(fitted, monkeypatch):
    """Without forecast.decisions the page's recipe table is builtin_recipe_table's: best first, as its
    recommendation argues (worst first, the table's first row contradicted the headline above it)."""
    monkeypatch.setitem(sys.modules, "forecast.decisions", None)
    table, rec, _ = rp.scale_decision(fitted, 1e5, 0.6)
    assert table["p_best"].is_monotonic_decreasing
    assert rec.reasons[0].startswith(f"{table['recipe'].iloc[0]}:")


def test_the_asymptote_columns_are_the_fits_quantiles_in_their_order(fitted, report_file):
    """A_q05, A_q50 and A_q95 are the recipe asymptote's own 5%, 50% and 95% quantiles (fc.asymptote()),
    so the page's interval reads low to high."""
    _, data = report_file
    ours = data.recipe_table.set_index("recipe")[["A_q05", "A_q50", "A_q95"]].sort_index()
    theirs = fitted.asymptote().query("level == 'recipe'").set_index("recipe")[["q05", "q50", "q95"]].sort_index()
    np.testing.assert_allclose(ours.to_numpy(), theirs.to_numpy())
    assert (ours["A_q05"] < ours["A_q50"]).all() and (ours["A_q50"] < ours["A_q95"]).all()


def test_the_built_in_rules_reasons_cite_the_expected_metric_the_table_beside_them_cites():
    """Without forecast.decisions the recommendation's reasons said "metric at budget 0.600 [0.500,
    0.700]", the median, right above the recipe table's "0.610 [0.500, 0.700]" for the same recipe,
    its expected value: one quantity, two numbers. They cite the table's expected value, as
    forecast.decisions' recommendation does."""
    data = hand_made_report()
    data.recommendation = rp.builtin_recommendation(data.recipe_table, data.budget, data.compute_unit, data.target)
    assert data.recommendation.reasons[0].startswith("a<script>: metric at budget 0.610 [0.500, 0.700], ")
    assert data.recommendation.reasons[1].startswith("b: metric at budget 0.490 [0.400, 0.600], ")
    page = rp.render_report(data)
    assert "a<script>\t0.90\t0.610 [0.500, 0.700]\t" in tables_text(page)["recipe-table"]  # the same number in the table


def test_a_budget_nobody_gave_is_named_as_chosen_in_the_pages_header(fitted):
    """`forecast report RUNS -o r.html` without --budget plans at 4x the largest compute observed: the
    terminal says so ('(4x the largest compute observed; --budget sets one)'), while the page's header,
    which the meeting reads, said 'budget 64,320 gpu_hours' as if someone had asked for that budget (a
    target nobody gave is named as chosen there). The header now names a chosen budget as chosen too."""
    data = hand_made_report()
    data.settings = rp.COMMAND_SETTINGS  # as `forecast report` collects it
    assert "--budget sets one" not in rp.header_html(data)
    data.budget_chosen = True
    assert ("budget 400 gpu_hours (4x the largest compute observed; --budget sets one) · target 0.6 ·"
            in rp.html.unescape(rp.header_html(data)))
    assert rp.collect_report(fitted, target=0.6).budget_chosen is True


def test_the_p_best_bar_writes_its_probability_as_the_rest_of_the_page_and_is_as_long_as_it():
    """A recipe best in 1 draw of 1000 is '<0.01', not '0.00' (which reads as never), and the bar's
    length is proportional to P(best): 80 px for 1."""
    assert rp.prob_bar_html(0.001) == '<span class="bar" style="width:0px"></span>&lt;0.01'
    assert rp.prob_bar_html(0.5) == '<span class="bar" style="width:40px"></span>0.50'
    assert rp.prob_bar_html(0.999) == '<span class="bar" style="width:80px"></span>&gt;0.99'


def test_stops_are_listed_first_then_the_runs_that_continue():
    """The stop table puts the news first: every stop (by recipe, then run), then the continues."""
    finished = {f"done{i}": 0.70 for i in range(1, 5)}
    short = {f"short{i}": 0.30 + 0.01 * i for i in range(1, 5)}
    fc = LevelsFit({**finished, **short}, {**dict.fromkeys(finished, 2.0), **dict.fromkeys(short, 0.5)})
    table = rp.stop_advice(fc, 1.0, None)[0].table
    assert list(table["run_id"]) == ["done1", "done2", "done3", "done4", "short1", "short2", "short3", "short4"]
    assert list(table["decision"]) == ["stop"] * 6 + ["continue"] * 2


def test_every_cell_of_the_recipe_and_compute_to_target_tables_says_its_own_number():
    """The two tables of the hand-made page, cell by cell: P(>= target) is p_target, not P(ever reaches),
    the intervals read low to high, and the compute-to-target table's 5% and 95% columns hold those quantiles."""
    tables = tables_text(rp.render_report(hand_made_report()))
    rows = [line.strip("\t").split("\t") for line in tables["recipe-table"].splitlines() if line.strip()]
    assert rows[1:] == [["a<script>", "0.90", "0.610 [0.500, 0.700]", "0.620 [0.550, 0.700]", "20 [10, 40]", "1.00"],
                        ["b", "0.10", "0.490 [0.400, 0.600]", "0.520 [0.450, 0.600]", "never [100, never]", "0.10"]]
    rows = [line.strip("\t").split("\t") for line in tables["compute-to-target-table"].splitlines() if line.strip()]
    assert rows[0] == ["recipe", "median (gpu_hours)", "5%", "95%", "P(ever reaches)", "P(≥ 0.6 at 400 gpu_hours)"]
    assert rows[1:] == [["a<script>", "20", "10", "40", "1.00", "1.00"], ["b", "never", "100", "never", "0.20", "0.10"]]
    text = [line.split() for line in rp.recipe_table_text(hand_made_report()).splitlines()[1:]]
    assert text[1] == ["b", "0.10", "0.490", "[0.400,", "0.600]", "0.520", "[0.450,", "0.600]", "never", "[100,", "never]",
                       "0.10"]


def test_the_diagnostics_section_shows_the_divergences_and_every_problem():
    """Convergence problems are shown, never hidden: 7 divergent transitions are written as 7 in the
    diagnostics table and each problem is listed under it, not only in the banner at the top."""
    d = {"converged": False, "max_rhat": 1.005, "rhat_limit": 1.01, "min_ess_bulk": 742.0, "ess_limit": 200.0,
         "min_ess_tail": 580.0, "divergences": 7, "n_draws": 4000,
         "problems": ["7 divergent transitions (need 0): the sampler could not explore <some> of the posterior"]}
    html = rp.diagnostics_html(d)
    assert "<dt>divergent transitions</dt><dd>7</dd>" in html and "NOT CONVERGED" in html
    assert "<li>7 divergent transitions (need 0): the sampler could not explore &lt;some&gt; of the posterior</li>" in html


def test_the_stop_summary_names_up_to_six_stopped_runs_and_counts_more_by_rule():
    def summary(n):
        table = pd.DataFrame({"run_id": [f"r{k}" for k in range(n)], "recipe": "r", "decision": "stop",
                              "rule": "beats_best", "reason": "stop: a reason"})
        return re.sub(r'<span class="name">([^<]*)</span>', r"\1", rp.stop_summary_html(table))

    assert "6 runs: r0, r1, r2, r3, r4, r5</p>" in summary(6)
    assert "7 runs: 7 by rule beats_best (e.g. stop: a reason)</p>" in summary(7)


class AsymptotesFit:
    """A stand-in for a fit whose recipes' asymptote quantiles are given."""

    def __init__(self, q05, q50):
        self.table = pd.DataFrame({"level": "recipe", "recipe": [f"r{k}" for k in range(len(q50))], "q05": q05,
                                   "q50": q50, "q95": [0.99] * len(q50)})

    def asymptote(self):
        return self.table


def test_the_chosen_target_is_the_median_asymptote_rounded_down():
    """The page's chosen target: the median of the recipes' median asymptotes (not another quantile),
    rounded down to 0.01 (0.618 is 0.61, not 0.62: a target rounded up is reached by fewer than half)."""
    assert rp.default_target_from_asymptotes([0.5, 0.618, 0.7]) == 0.61
    assert rp.default_target(AsymptotesFit(q05=[0.3, 0.4, 0.5], q50=[0.55, 0.618, 0.7])) == 0.61


def test_the_header_names_the_budget_with_its_unit_and_the_target():
    assert "budget 400 gpu_hours · target 0.6 · 4 runs of 2 recipes ·" in rp.header_html(hand_made_report())


def test_the_provenance_gives_the_compute_range_low_to_high(fitted):
    runs = fitted.runs_["compute"]
    assert rp.provenance(fitted)["compute_range"] == [float(runs.min()), float(runs.max())]
    assert "<dt>compute observed</dt><dd>1 – 100 gpu_hours</dd>" in rp.provenance_html(hand_made_report().provenance)


def test_fmt_prob_writes_only_all_of_the_draws_as_1():
    assert rp.fmt_prob(0.995) == ">0.99" and rp.fmt_prob(0.9949) == "0.99"
    assert rp.fmt_prob(0.005) == "0.01" and rp.fmt_prob(0.0049) == "<0.01" and rp.fmt_prob(0.0) == "0.00"
