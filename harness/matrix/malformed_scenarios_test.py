#!/usr/bin/python3
"""ctest scenario.malformed_corpus: every file of harness/matrix/malformed_scenarios/
is refused by `shardcheck list FILE` the way docs/scenarios.md and
docs/reliability.md promise, and the anchor/alias files of
harness/matrix/valid_scenarios/ are accepted.

For each malformed file: exit code 2 (bad input); nothing listed on stdout;
stderr is UTF-8 text whose non-empty lines are exactly one line,
`[shardcheck: error: ]FILE:LINE:COLUMN: message` with FILE the path as
passed and LINE, COLUMN positive (LINE at most one past the file's last
line); the message holds the substring of EXPECTED below (and, where
given, LINE is the expected line); no crash (a signal, 134/139,
"terminate called", "std::", a raw yaml-cpp message).

For each valid file: exit code 0, the expected number of cells ("N cells")
and the expected cell id among them.

Usage: malformed_scenarios_test.py SHARDCHECK CORPUS_DIR [VALID_DIR]
(VALID_DIR defaults to CORPUS_DIR/../valid_scenarios). Standard library only.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

TIMEOUT_S = 20

# file name -> (substring the one error line must hold, expected line or None).
# Keep in step with malformed_scenarios/README.md.
EXPECTED = {
    # Systems under test and expected failures (docs/systems.md, docs/scenarios.md)
    "unknown_system.yaml": ("unknown system 'megatron'", 3),
    "system_unknown_variant.yaml": ("unknown variant 'turbo' of system torch-fsdp2", 3),
    "system_unknown_version.yaml": ("system megatron-core has no pinned release '0.17.0'", 3),
    "sharding_type_dcp_typo.yaml": ("or dcp", 6),
    "expect_without_reason.yaml": ("expect: fail needs a reason", 7),
    "expect_not_fail.yaml": ("the only expectation is fail", 7),
    "reason_not_in_findings.yaml": ("points into docs/findings.md", 8),
    "reason_unknown_anchor.yaml": ("has no heading with the anchor #no-such-finding", 8),
    "xfail_without_reason.yaml": ("xfail entry: missing key 'reason'", 8),
    "check_against_unknown.yaml": ("check against 'megatron'", 8),
    # YAML syntax
    "syntax_unclosed_flow_sequence.yaml": ("YAML syntax: end of sequence flow not found", None),
    "syntax_unclosed_flow_mapping.yaml": ("YAML syntax: end of map flow not found", None),
    "syntax_bad_indentation.yaml": ("YAML syntax: illegal map value", 4),
    "syntax_bad_indentation_sequence.yaml": ("YAML syntax: end of map not found", None),
    "syntax_tab_indentation.yaml": ("tab", 8),
    "syntax_unterminated_double_quote.yaml": ("quote", 2),
    "syntax_unterminated_single_quote.yaml": ("quote", 3),
    "syntax_undefined_alias.yaml": ("the referenced anchor is not defined", 4),
    "syntax_deep_nesting.yaml": ("deep", 6),
    "syntax_two_documents.yaml": ("document", None),
    "syntax_colon_in_plain_value.yaml": ("YAML syntax: illegal map value", 3),
    "alias_bomb.yaml": ("dp: expected an integer", None),
    # duplicate keys
    "duplicate_top_key.yaml": ("duplicate key 'dp' in scenario", 7),
    "duplicate_optimizer_key.yaml": ("duplicate key 'lr' in optimizer", 4),
    "duplicate_resume_key.yaml": ("duplicate key 'save_at' in resume plan", 7),
    # unknown keys
    "unknown_top_key.yaml": ("unknown key 'stepz' in scenario", 7),
    "unknown_optimizer_key.yaml": ("has no hyperparameter 'learning_rate'", 4),
    "unknown_resume_key.yaml": ("unknown key 'at' in resume plan", 7),
    "unknown_check_key.yaml": ("unknown key 'tol' in check", 7),
    "unknown_exclude_key.yaml": ("unknown key 'sharding' in exclude entry", 7),
    "unknown_include_key.yaml": ("unknown key 'backend' in include entry", 7),
    # missing keys
    "missing_required_dp.yaml": ("missing key 'dp'", None),
    "missing_optimizer_name.yaml": ("optimizer: missing key 'name'", 4),
    "missing_check_kind.yaml": ("check: missing key 'kind'", 7),
    "missing_save_at.yaml": ("resume plan: missing key 'save_at'", 7),
    # wrong types
    "type_string_for_steps.yaml": ("steps: expected an integer, got 'ten'", 7),
    "type_string_for_dp.yaml": ("dp: expected an integer, got 'two'", 6),
    "type_float_for_dp.yaml": ("dp: expected an integer, got '1.5'", 6),
    "type_stray_bracket_in_dp.yaml": ("dp: expected an integer, got '1, 2]'", 6),
    "type_list_for_steps.yaml": ("steps: expected an integer", 7),
    "type_list_for_name.yaml": ("name: expected a string", 2),
    "type_map_for_dp.yaml": ("dp: expected an integer", 6),
    "type_map_for_checks.yaml": ("checks: expected a list", 7),
    "type_map_for_exclude.yaml": ("exclude: expected a list of mappings", 7),
    "type_map_for_include.yaml": ("include: expected a list of mappings", 7),
    "type_null_dp.yaml": ("dp: no value", 6),
    "type_empty_list_dp.yaml": ("dp: empty list", 6),
    "type_empty_value_name.yaml": ("name:", 2),
    "type_list_of_lists_dp.yaml": ("dp: expected an integer", 6),
    "type_string_for_hyperparameter.yaml": ("lr: 'fast' is not a finite number", 4),
    "type_map_for_hyperparameter.yaml": ("lr: expected a number", 4),
    "type_bool_not_bool.yaml": ("nesterov: 'maybe' is not true or false", 4),
    "type_resume_scalar.yaml": ("resume: expected 'none'", 7),
    "type_scenario_is_list.yaml": ("a scenario is a mapping", None),
    "type_scenario_is_scalar.yaml": ("a scenario is a mapping", None),
    "type_complex_key.yaml": ("keys must be plain words", 7),
    "type_include_entry_scalar.yaml": ("include entry: expected a mapping", 7),
    "type_optimizer_nested_list.yaml": ("optimizer: expected a name or a mapping", 4),
    "empty_optimizer_list.yaml": ("optimizer: empty list", 4),
    # impossible values
    "dp_zero.yaml": ("dp must be in [1, 1024]", 6),
    "dp_negative.yaml": ("dp must be in [1, 1024]", 6),
    "dp_not_dividing_micro_batches.yaml": ("dp 5 does not divide micro_batches 24", 6),
    "steps_negative.yaml": ("steps must be in [1, 100000]", 7),
    "steps_zero.yaml": ("steps must be in [1, 100000]", 7),
    "micro_batches_too_many.yaml": ("micro_batches must be in [1, 32]", 7),
    "resume_dp_not_dividing.yaml": ("resume dp 5 does not divide micro_batches 24", 7),
    "resume_dp_zero.yaml": ("resume dp must be in [1, 1024]", 7),
    "resume_dp_too_large.yaml": ("resume dp must be in [1, 1024]", 7),
    "resume_save_at_past_end.yaml": ("save_at 8 must be in [1, steps - 1]", 8),
    "resume_bucket_change_dp_reshardable.yaml": ("cannot change the bucket size on resume", 8),
    "bucket_size_negative.yaml": ("bucket_size must be in [0, 2^40] elements", 7),
    "bucket_size_too_large.yaml": ("bucket_size must be in [0, 2^40] elements", 7),
    "include_steps_too_many.yaml": ("steps must be in [1, 100000]", 7),
    "check_max_ulp_too_large.yaml": ("max_ulp must be in [0, 2^32]", 7),
    "seed_negative.yaml": ("seed must be >= 0", 7),
    "unknown_optimizer.yaml": ("unknown optimizer 'adamx'", 4),
    "unknown_scalar_optimizer.yaml": ("unknown scalar optimizer 'rmsprop'", 4),
    "unknown_sharding_type.yaml": ("unknown sharding type 'zero3'", 5),
    "unknown_dtype.yaml": ("dtype 'fp16'", 7),
    "unknown_model.yaml": ("unknown model 'resnet50'", 3),
    "unknown_oracle_model.yaml": ("unknown oracle model 'gpt-huge'", 3),
    "unknown_backend.yaml": ("backend 'mpi'", 7),
    "bad_shapes_model.yaml": ("dimension '0' is not a positive integer", 3),
    "whole_param_on_vector_model.yaml": ("needs a 2-D hidden weight", 4),
    "empty_matrix_after_exclude.yaml": ("the matrix is empty after exclude", None),
    "empty_file.yaml": ("a scenario is a mapping", 1),
    "only_comments.yaml": ("a scenario is a mapping", None),
    "only_document_marker.yaml": ("a scenario is a mapping", None),
    # huge numbers
    "huge_int_steps.yaml": ("out of range", 7),
    "huge_int_seed.yaml": ("out of range", 7),
    "huge_int_bucket_size.yaml": ("out of range", 7),
    "huge_dp.yaml": ("out of range", 6),
    "huge_float_lr.yaml": ("'1e400' is not a finite number", 4),
    "huge_float_max_grad_norm.yaml": ("finite", 4),
    "huge_float_atol.yaml": ("finite", 7),
    "infinite_lr.yaml": ("is not a finite number", 4),
    "nan_min_fall.yaml": ("min_fall: expected a finite number", 7),
    # bytes that are not UTF-8 text
    "non_utf8_value.yaml": ("UTF-8", 2),
    "non_utf8_key.yaml": ("UTF-8", 7),
    "non_utf8_optimizer_name.yaml": ("UTF-8", 4),
    "non_utf8_utf16_bom.yaml": ("UTF-8", 1),
    "non_printable_nul_byte.yaml": ("control character", 2),
    # hyperparameters
    "hyper_not_declared.yaml": ("optimizer sgd has no hyperparameter 'beta1'", 4),
    "hyper_not_declared_all.yaml": ("optimizer sgd has no hyperparameter 'beta1'", 4),
    "hyper_out_of_range_beta.yaml": ("invalid beta1: 1.5", 4),
    "hyper_negative_lr.yaml": ("invalid lr: -0.001", 4),
    "hyper_ns_steps_zero.yaml": ("invalid ns_steps: 0", 4),
    "hyper_bad_choice.yaml": ("scale_mode: 'fancy'", 4),
    "hyper_ns_coefficients_pair.yaml": ("ns_coefficients: 2 numbers", 4),
    "hyper_eps_zero.yaml": ("invalid eps: 0", 4),
    "scalar_optimizer_on_elementwise.yaml": ("optimizer sgd takes none", 4),
    "scalar_hyper_on_elementwise.yaml": ("optimizer sgd has no scalar optimizer", 4),
    "scalar_optimizer_conflict.yaml": ("scalar optimizer lion conflicts with optimizer muon_adam", 4),
    "label_with_all.yaml": ("a label needs a single optimizer", 4),
    "lr_decay_without_style.yaml": ("decay steps need a decay style", 4),
    # checks
    "check_unknown_kind.yaml": ("check kind 'exact'", 7),
    "check_bitwise_with_tolerance.yaml": ("a bitwise check takes no tolerance", 7),
    "check_loss_on_oracle.yaml": ("a loss check needs a real model", 7),
    "check_min_fall_out_of_range.yaml": ("min_fall must be in (0, 1)", 7),
    # include / exclude
    "include_dp_not_dividing.yaml": ("dp 7 does not divide micro_batches 24", 7),
    "exclude_unknown_value_type.yaml": ("dp: expected", 7),
}

# valid file -> (number of cells, one cell id that must be listed).
VALID = {
    "anchors_aliases.yaml": (7, "adam.dp_reshardable.dp3-resume@4.bf16.oracle-mixed-small"),
    "anchors_merge_optimizers.yaml": (6, "adamw-slow.dp_reshardable.dp2.fp32.oracle-mixed-small"),
    "anchors_merge_include.yaml": (6, "lion.dp_reshardable.dp3-to-dp6@4.bf16.oracle-mixed-small"),
}

CRASH_MARKERS = ("terminate called", "std::", "what():", "Segmentation fault", "core dumped",
                 "Aborted", "yaml-cpp: error", "Traceback")


def run(binary, path):
    try:
        p = subprocess.run([binary, "list", path], capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, b"", b""
    except OSError as e:
        return -1000, b"", f"cannot run {binary}: {e}".encode()
    return p.returncode, p.stdout, p.stderr


def check_malformed(binary, corpus, name):
    """Returns a list of problems (empty: ok) and the command's stderr."""
    path = os.path.join(corpus, name)
    rc, out, err_bytes = run(binary, path)
    if rc is None:
        return [f"no answer within {TIMEOUT_S} s"], ""
    if rc == -1000:
        return [err_bytes.decode()], ""
    problems = []
    try:
        err = err_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        problems.append(f"stderr is not UTF-8 text (byte {err_bytes[e.start]:#04x})")
        err = err_bytes.decode("utf-8", errors="replace")
    text = out.decode("utf-8", errors="replace") + err
    if rc < 0 or rc in (134, 139):
        problems.append(f"crashed (exit {rc})")
    elif rc != 2:
        problems.append(f"exit {rc}, expected 2")
    for marker in CRASH_MARKERS:
        if marker in text:
            problems.append(f"output holds {marker!r}")
    if out.strip():
        problems.append(f"listed on stdout: {out.decode('utf-8', errors='replace').strip()[:120]!r}")
    lines = [l for l in err.splitlines() if l.strip()]
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr, expected one")
    if not lines:
        return problems, err
    line = lines[0]
    m = re.match(r"^(?:shardcheck: error: )?" + re.escape(path) + r":(\d+):(\d+): (.+)$", line)
    if not m:
        problems.append(f"the error line does not start with '{path}:LINE:COLUMN: '")
        return problems, err
    lno, col, message = int(m.group(1)), int(m.group(2)), m.group(3)
    with open(path, "rb") as f:
        nlines = f.read().count(b"\n")
    if lno < 1 or col < 1:
        problems.append(f"line:column {lno}:{col} is not positive")
    elif lno > nlines + 1:
        problems.append(f"line {lno} is past the end of the file ({nlines} lines)")
    want, want_line = EXPECTED[name]
    if want not in message:
        problems.append(f"message lacks {want!r}")
    if want_line is not None and lno != want_line:
        problems.append(f"blames line {lno}, expected line {want_line}")
    return problems, err


def check_valid(binary, folder, name):
    path = os.path.join(folder, name)
    rc, out_bytes, err_bytes = run(binary, path)
    if rc is None:
        return [f"no answer within {TIMEOUT_S} s"], ""
    if rc == -1000:
        return [err_bytes.decode()], ""
    out = out_bytes.decode("utf-8", errors="replace")
    err = err_bytes.decode("utf-8", errors="replace")
    problems = []
    if rc != 0:
        problems.append(f"exit {rc}, expected 0")
    cells, cell_id = VALID[name]
    lines = [l for l in out.splitlines() if l.strip()]
    if not lines or not re.fullmatch(r"\d+ cells?", lines[-1].strip()):
        problems.append("no 'N cells' line")
    elif int(lines[-1].split()[0]) < 1:
        problems.append("no cell listed")
    elif int(lines[-1].split()[0]) != cells:
        problems.append(f"{lines[-1].strip()}, expected {cells}")
    if not any(l.split()[0] == cell_id for l in lines[:-1]):
        problems.append(f"cell {cell_id} not listed")
    return problems, err


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    binary, corpus = sys.argv[1], sys.argv[2]
    valid = sys.argv[3] if len(sys.argv) == 4 else os.path.join(
        os.path.dirname(os.path.normpath(corpus)), "valid_scenarios")
    failures = []

    files = sorted(n for n in os.listdir(corpus) if n.endswith(".yaml"))
    for n in files:
        if n not in EXPECTED:
            failures.append(n)
            print(f"FAIL {n}: no expected message in EXPECTED (malformed_scenarios_test.py)")
    for n in sorted(set(EXPECTED) - set(files)):
        failures.append(n)
        print(f"FAIL {n}: in EXPECTED but not in {corpus}")
    readme = os.path.join(corpus, "README.md")
    if os.path.exists(readme):
        with open(readme, encoding="utf-8") as f:
            listed = f.read()
        for n in files:
            if f"`{n}`" not in listed:
                failures.append(n)
                print(f"FAIL {n}: not listed in {readme}")

    refused = 0
    todo = [n for n in files if n in EXPECTED]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        results = pool.map(lambda n: check_malformed(binary, corpus, n), todo)
        for n, (problems, err) in zip(todo, results):
            if problems:
                failures.append(n)
                shown = err.strip().replace("\n", "\n      ")[:400]
                print(f"FAIL {n}: {'; '.join(problems)}\n    $ {binary} list {os.path.join(corpus, n)}"
                      f"\n      {shown}")
            else:
                refused += 1
                print(f"ok   {n}")

    listed_ok = 0
    vfiles = sorted(n for n in os.listdir(valid) if n.endswith(".yaml")) if os.path.isdir(valid) else []
    for n in sorted(set(VALID) - set(vfiles)):
        failures.append(n)
        print(f"FAIL {n}: missing from {valid}")
    for n in vfiles:
        if n not in VALID:
            failures.append(n)
            print(f"FAIL {n}: no expected cells in VALID (malformed_scenarios_test.py)")
            continue
        problems, err = check_valid(binary, valid, n)
        if problems:
            failures.append(n)
            print(f"FAIL {n}: {'; '.join(problems)}\n    $ {binary} list {os.path.join(valid, n)}"
                  f"\n      {err.strip()[:400]}")
        else:
            listed_ok += 1
            print(f"ok   {n} (valid)")

    print(f"{refused} malformed files refused with file:line:column, {listed_ok} valid files listed"
          + (f"; {len(failures)} FAILED" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
