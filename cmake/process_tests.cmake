# The tests that run shardcheck's own processes: the scenario cells of
# scenarios/ci, the launcher matrix, end-to-end checks through real rank
# processes, the communicator self-tests and the checkpoint tools' Python
# reader. They need the Gloo backend (CPU ranks), so the default build has
# them and the torch 2.x build (NCCL only) does not.

# Every cell of scenarios/ci/*.yaml runs under ctest, grouped into one test
# per (scenario, optimizer, sharding type) so that one process runs the
# group's cells (labels: checkpoint, optimizer, sharding type, every dpN and
# dtype of the group). The list comes from `shardcheck list` after the binary
# is built, as gtest_discover_tests does for gtest. Their thread-ranks talk
# through the in-process communicator (`--thread-comm in-process`: the same
# collectives without loopback TCP, about 7x faster; docs/performance.md,
# "The matrix's own speed"); run.gloo_thread_ranks below and the
# distributed.* tests keep Gloo under the same cells' checks.
file(GLOB scenario_ci_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/scenarios/ci/*.yaml)
set(scenario_tests_file ${CMAKE_BINARY_DIR}/scenario_tests.cmake)
add_custom_command(OUTPUT ${scenario_tests_file}
  COMMAND shardcheck list ${scenario_ci_files} --force --ctest ${scenario_tests_file} --group-by optimizer,sharding_type
          --thread-comm in-process
          --binary $<TARGET_FILE:shardcheck> --out-root ${CMAKE_BINARY_DIR}/scenario-out
  DEPENDS shardcheck ${scenario_ci_files}
  COMMENT "Listing the scenario cells for ctest"
  VERBATIM)
add_custom_target(scenario_tests ALL DEPENDS ${scenario_tests_file})
file(WRITE ${CMAKE_BINARY_DIR}/scenario_tests_include.cmake
  "if(EXISTS \"${scenario_tests_file}\")\n  include(\"${scenario_tests_file}\")\nelse()\n  add_test(scenario_tests_not_built false)\nendif()\n")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/scenario_tests_include.cmake)

# The same cells' checks with thread-ranks over Gloo (TCP on loopback,
# Gloo's reduce_scatter/all_gather emulations, bf16 through fp32): every
# sharding type and resharding pair of Muon + Lion (elementwise and
# layer-wise), and the real model whose fp32 gradient sums go through Gloo.
add_test(NAME run.gloo_thread_ranks.oracle
  COMMAND shardcheck run ${PROJECT_SOURCE_DIR}/scenarios/ci/oracle_reshard.yaml --filter optimizer=muon_lion
          --thread-comm gloo --quiet --force --out ${CMAKE_BINARY_DIR}/test-out/gloo_thread_ranks/oracle)
add_test(NAME run.gloo_thread_ranks.real_model
  COMMAND shardcheck run ${PROJECT_SOURCE_DIR}/scenarios/ci/tiny_models_fp32.yaml
          --thread-comm gloo --quiet --force --out ${CMAKE_BINARY_DIR}/test-out/gloo_thread_ranks/real_model)
set_tests_properties(run.gloo_thread_ranks.oracle run.gloo_thread_ranks.real_model PROPERTIES
  LABELS "checkpoint;gloo" TIMEOUT 300 PROCESSORS 2)

# A cell's ranks as processes through the launcher (the GPU cells' path, on
# Gloo here), and GPU cells skipped when a node has too few GPUs.
add_test(NAME run.cells_as_processes
  COMMAND /bin/sh ${PROJECT_SOURCE_DIR}/harness/matrix/cell_processes_test.sh $<TARGET_FILE:shardcheck>
          ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-out/cells_as_processes)
set_tests_properties(run.cells_as_processes PROPERTIES LABELS "distributed;checkpoint" TIMEOUT 300
  PROCESSORS 2)

# End to end through real rank processes: the distributed final state equals
# the reference's file; an export after a DP change equals the reference.
add_test(NAME distributed.final_equals_reference
  COMMAND /bin/sh ${PROJECT_SOURCE_DIR}/harness/cli/done_when_test.sh $<TARGET_FILE:shardcheck> final
          ${CMAKE_BINARY_DIR}/test-out/final_equals_reference)
set_tests_properties(distributed.final_equals_reference PROPERTIES LABELS "distributed;muon_lion;dp3" TIMEOUT 300 PROCESSORS 2)
add_test(NAME checkpoint.export_after_reshard_equals_reference
  COMMAND /bin/sh ${PROJECT_SOURCE_DIR}/harness/cli/done_when_test.sh $<TARGET_FILE:shardcheck> reshard
          ${CMAKE_BINARY_DIR}/test-out/export_after_reshard)
set_tests_properties(checkpoint.export_after_reshard_equals_reference PROPERTIES
  LABELS "checkpoint;muon_lion;dp_reshardable;dp3;dp2" TIMEOUT 300 PROCESSORS 2)

# What a new user runs into, and the exit-code contract (docs/reliability.md).
add_test(NAME cli.contract
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/cli/cli_contract_test.py
          $<TARGET_FILE:shardcheck> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.contract PROPERTIES LABELS "reliability;unit" TIMEOUT 300 PROCESSORS 2)

# The edges of a run: no PASS without a check, no output overwritten,
# interrupted runs write what finished, stopped runs leave no --out, ranks
# die with their launcher, duplicate cells refused (docs/reliability.md).
add_test(NAME cli.edges
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/cli/cli_edges_test.py
          $<TARGET_FILE:shardcheck> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.edges PROPERTIES LABELS "reliability" TIMEOUT 600 PROCESSORS 2)

# Every numeric flag of every subcommand, from its --help, tried with 0, -1
# and a huge value: out of range is refused, naming the flag.
add_test(NAME cli.numeric_flags
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/cli/cli_numeric_flags_test.py
          $<TARGET_FILE:shardcheck> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.numeric_flags PROPERTIES LABELS "reliability" TIMEOUT 300)

# The shipped scenarios leave no comparison group unchecked, or say why
# (`unchecked:`; docs/scenarios.md, "Nothing left unchecked").
add_test(NAME scenario.nothing_unchecked
  COMMAND /bin/sh -c "out=$($<TARGET_FILE:shardcheck> list \"$@\" 2>&1 >/dev/null) || exit 2; if [ -n \"$out\" ]; then printf '%s\\n' \"$out\"; exit 1; fi; echo 'every shipped cell checks every group, or its scenario says why'"
          sh ${PROJECT_SOURCE_DIR}/scenarios/default.yaml ${PROJECT_SOURCE_DIR}/scenarios/seed_regression_lion.yaml
          ${PROJECT_SOURCE_DIR}/scenarios/multi_gpu.yaml ${PROJECT_SOURCE_DIR}/scenarios/systems.yaml ${scenario_ci_files})
set_tests_properties(scenario.nothing_unchecked PROPERTIES LABELS "unit;checkpoint" TIMEOUT 120)

# The headline scenario checks what it says: its resharded gpt-tiny cells
# (dp 2 -> 4, both sharding types) compare params, main params and every state
# key bitwise against the reference at every step.
add_test(NAME scenario.seed_regression_bitwise
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/matrix/seed_regression_test.py
          $<TARGET_FILE:shardcheck> ${PROJECT_SOURCE_DIR}/scenarios/seed_regression_lion.yaml
          ${CMAKE_BINARY_DIR}/test-out/seed_regression_bitwise model=gpt-tiny,resume_dp=4)
set_tests_properties(scenario.seed_regression_bitwise PROPERTIES LABELS "checkpoint;muon_lion"
                     TIMEOUT 600 PROCESSORS 2)

# Malformed scenario files: each refused with exit code 2 and one FILE:LINE:COLUMN
# line; the anchor/alias/merge-key files of valid_scenarios/ list their cells.
add_test(NAME scenario.malformed_corpus
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/matrix/malformed_scenarios_test.py
          $<TARGET_FILE:shardcheck> ${PROJECT_SOURCE_DIR}/harness/matrix/malformed_scenarios
          ${PROJECT_SOURCE_DIR}/harness/matrix/valid_scenarios)
set_tests_properties(scenario.malformed_corpus PROPERTIES LABELS "reliability;unit" TIMEOUT 300 PROCESSORS 2)

# Faults injected through failpoints into launched train runs
# (harness/launch/fault_injection_test.py; docs/reliability.md): crashes at
# every save phase of every sharding type, dead and stuck ranks, a full disk
# (a tmpfs: root only, exit 77 = skipped with the reason), interrupts.
foreach(group crash_during_save dead_ranks disk_full interrupts)
  add_test(NAME reliability.${group}
    COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/launch/fault_injection_test.py
            $<TARGET_FILE:shardcheck> ${group})
  set_tests_properties(reliability.${group} PROPERTIES LABELS "reliability;distributed"
    TIMEOUT 600 PROCESSORS 2 SKIP_RETURN_CODE 77)
endforeach()

# The reference's output read with the Python standard library alone.
add_test(NAME cli.reference_header_python
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/cli/reference_header_test.py
          $<TARGET_FILE:shardcheck>)
set_tests_properties(cli.reference_header_python PROPERTIES LABELS unit TIMEOUT 120)

include(${PROJECT_SOURCE_DIR}/cmake/distributed_tests.cmake)

# Communicator and launcher tests
# (the ctests below run the real binary: N ranks through `shardcheck launch`, and a rank that
# SIGKILLs itself mid-run must end the job non-zero and named, not hang.)
foreach(n 1 2 3 4)
  add_test(NAME dist.comm_selftest.np${n}
    COMMAND $<TARGET_FILE:shardcheck> launch --nproc ${n} --timeout 150 --
            $<TARGET_FILE:shardcheck> comm-selftest --timeout 60)
  set_tests_properties(dist.comm_selftest.np${n} PROPERTIES LABELS distributed TIMEOUT 180)
endforeach()
add_test(NAME dist.comm_selftest.single COMMAND $<TARGET_FILE:shardcheck> comm-selftest)
set_tests_properties(dist.comm_selftest.single PROPERTIES LABELS distributed TIMEOUT 120)
add_test(NAME dist.launch_killed_rank
  COMMAND /bin/sh ${PROJECT_SOURCE_DIR}/harness/launch/launch_killed_rank_test.sh
          $<TARGET_FILE:shardcheck>)
set_tests_properties(dist.launch_killed_rank PROPERTIES LABELS distributed TIMEOUT 90)
# Several nodes: launchers in network namespaces made by the test (root and
# iproute2; exit 77 = skipped, with the reason, where namespaces are forbidden).
add_test(NAME dist.multinode_netns
  COMMAND /bin/sh ${PROJECT_SOURCE_DIR}/harness/launch/multinode_netns_test.sh
          $<TARGET_FILE:shardcheck> ${CMAKE_BINARY_DIR}/test-out/multinode_netns)
set_tests_properties(dist.multinode_netns PROPERTIES LABELS "distributed;multinode" TIMEOUT 240
  SKIP_RETURN_CODE 77 PROCESSORS 2)

# Checkpoint tools tests
# (the Python reader of docs/checkpoint-format.md, run verbatim against
# checkpoints of all four sharding types at dp 1 and dp 3 and compared with
# `shardcheck export`, byte for byte; the gtests of inspect, ckpt-diff and
# export are in harness/cli/cmd_ckpt_tools_test.cc.)
add_test(NAME ckpt.python_reader
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/harness/cli/checkpoint_reader_test.py
          $<TARGET_FILE:shardcheck> ${PROJECT_SOURCE_DIR}/docs/checkpoint-format.md)
set_tests_properties(ckpt.python_reader PROPERTIES LABELS checkpoint TIMEOUT 300)

