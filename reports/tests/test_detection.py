"""The "Detection power" section and summary line (detection.py): shown when
RESULTS_DIR/selftest.json exists, absent otherwise; malformed files are input
errors naming the file and key."""
import json
import os

import synth
from conftest import run_report


def detection_html(html: str) -> str:
    start = html.index('<h2 id="detection">')
    return html[start:html.index('<h2 id="cells">', start)]


def row(section: str, name: str) -> str:
    """The table row of failpoint `name`."""
    start = section.rindex("<tr", 0, section.index(f"<td><code>{name}</code>"))
    return section[start:section.index("</tr>", start)]


def test_section_counts_and_rows(make_report):
    r = make_report(synth.all_passing(), selftest=synth.selftest_doc())
    d = detection_html(r.html)
    assert "3 / 5 caught" in d
    assert '<a href="#detection">Detection power (3 / 5 caught)</a>' in r.html
    assert "clean run: <b class=\"ok\">passed</b> (22 cells)" in d
    caught = row(d, "skip_post_load_param_sync")
    assert not caught.startswith('<tr class="fail">')
    assert '<span class="ok">yes</span>' in caught and "bitwise-params" in caught
    assert "params.fc1.weight" in caught and "1.3 s" in caught
    assert "strict-load" in row(d, "third_state_key_dropped")
    assert "routing" in row(d, "scalar_params_routed_to_muon")
    # the bug text is escaped, never markup
    assert "&lt;b&gt;bold&lt;/b&gt;" in d and "<b>bold</b>" not in d


def test_escaped_and_unreached_failpoints_are_marked(make_report):
    r = make_report(synth.all_passing(), selftest=synth.selftest_doc())
    d = detection_html(r.html)
    escaped = row(d, "lion_sign_zero_is_one")
    assert escaped.startswith('<tr class="fail">')
    assert '<b class="neg">no: escaped</b>' in escaped and "reached, but no check failed" in escaped
    unreached = row(d, "drop_step_on_save")
    assert '<b class="neg">no: not reached (escaped)</b>' in unreached and "never reached" in unreached
    assert 'id="detection-escaped"' in d and "drop_step_on_save</code></b> (not reached)" in d
    assert '<span class="det-figure neg">' in d


def test_all_caught_is_green(make_report):
    r = make_report(synth.all_passing(), selftest=synth.selftest_doc(escaped=False))
    d = detection_html(r.html)
    assert '<span class="det-figure ok">3 / 3 caught</span>' in d
    assert 'id="detection-escaped"' not in d and '<tr class="fail">' not in d
    assert "**Detection power: 3 of 3 failpoints caught**; clean run passed (22 cells)." in r.md


def test_failed_clean_run_is_said(make_report):
    r = make_report(synth.all_passing(),
                    selftest=synth.selftest_doc(escaped=False, clean_failed=["adam.x.dp1"]))
    d = detection_html(r.html)
    assert '<b class="neg">FAILED</b> on 1 of 22 cells, so a catch means nothing' in d
    assert "the clean run failed on 1 of 22 cells" in r.md


def test_summary_line_names_the_escaped(make_report):
    r = make_report(synth.all_passing(), selftest=synth.selftest_doc())
    line = next(l for l in r.md.splitlines() if l.startswith("**Detection power"))
    assert line.startswith("**Detection power: 3 of 5 failpoints caught**; escaped: ")
    assert "`lion_sign_zero_is_one`" in line and "`drop_step_on_save` (not reached)" in line


def test_nothing_about_detection_without_selftest_json(make_report):
    r = make_report(synth.all_passing())
    assert 'id="detection"' not in r.html and "Detection power" not in r.html
    assert "Detection power" not in r.md


def test_summary_disagreeing_with_the_list_is_a_warning(make_report):
    doc = synth.selftest_doc(escaped=False)
    doc["summary"]["caught"] = 2
    r = make_report(synth.all_passing(), selftest=doc)
    assert "summary says 2 of 3 failpoints caught but its failpoints list has 3 of 3" in r.html


def _broken(tmp_path, text):
    out = str(tmp_path / "r")
    synth.write_results(out, synth.all_passing())
    with open(os.path.join(out, "selftest.json"), "w") as f:
        f.write(text)
    return out, run_report(out, check=False)


def test_wrong_format_is_an_input_error_naming_file_and_key(tmp_path):
    doc = synth.selftest_doc()
    doc["format"] = "shardcheck-selftest/9"
    out, proc = _broken(tmp_path, json.dumps(doc))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert os.path.join(out, "selftest.json") in lines[0] and "format" in lines[0]
    assert not os.path.exists(os.path.join(out, "report.html"))


def test_not_json_is_an_input_error(tmp_path):
    out, proc = _broken(tmp_path, "{not json")
    assert proc.returncode == 2
    assert os.path.join(out, "selftest.json") in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_unknown_verdict_is_an_input_error(tmp_path):
    doc = synth.selftest_doc()
    doc["failpoints"][0]["verdict"] = "maybe"
    out, proc = _broken(tmp_path, json.dumps(doc))
    assert proc.returncode == 2 and "failpoints[0].verdict" in proc.stderr
