# The external systems under test (docs/systems.md): the Python oracle port
# against the C++ oracle, the adapter protocol end to end with PyTorch FSDP2 +
# DCP (the negative check, expected failures, unsupported cells, the
# adapter's errors). They run in the systems' venv, .venv-torch
# (ci/setup-systems, which ci/test calls); the scenario cells of
# scenarios/ci/systems_fsdp2.yaml run with the other scenarios/ci cells
# (process_tests.cmake), labelled systems and fsdp2; those of
# scenarios/ci/systems_megatron.yaml likewise, labelled systems and megatron.
set(systems_python ${PROJECT_SOURCE_DIR}/.venv-torch/bin/python)
add_test(NAME systems.oracle_port
  COMMAND ${systems_python} -m unittest ${PROJECT_SOURCE_DIR}/systems/common/oracle_test.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(systems.oracle_port PROPERTIES LABELS "systems;unit" TIMEOUT 300
  ENVIRONMENT "SHARDCHECK_BINARY=$<TARGET_FILE:shardcheck>;PYTHONDONTWRITEBYTECODE=1")
# systems_test.py: the FSDP2 cells (marker torch) and the expectations that
# need no torch, as two tests so each can run alone.
add_test(NAME systems.protocol
  COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -m torch
          ${PROJECT_SOURCE_DIR}/systems/systems_test.py --binary $<TARGET_FILE:shardcheck>
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(systems.protocol PROPERTIES LABELS "systems;fsdp2;checkpoint" TIMEOUT 900
  PROCESSORS 2 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
add_test(NAME systems.expectations
  COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -m "not torch"
          ${PROJECT_SOURCE_DIR}/systems/systems_test.py --binary $<TARGET_FILE:shardcheck>
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(systems.expectations PROPERTIES LABELS "systems;unit" TIMEOUT 300
  PROCESSORS 2 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
# megatron-core's findings confirmed (docs/findings.md): each finding's cell
# against a copy of the release with its one spot patched must pass. The
# cells that show the findings unpatched are scenarios/ci/systems_megatron.yaml
# (xfail), run with the other scenarios/ci cells.
add_test(NAME systems.megatron_confirm
  COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider
          ${PROJECT_SOURCE_DIR}/systems/megatron_core/confirm_test.py --binary $<TARGET_FILE:shardcheck>
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(systems.megatron_confirm PROPERTIES LABELS "systems;megatron;checkpoint"
  TIMEOUT 900 PROCESSORS 2 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
