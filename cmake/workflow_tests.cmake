# The CI files shardcheck ships for users to copy (.github/workflows/*.yml,
# docs/ci-examples/.gitlab-ci.yml; docs/ci-examples/README.md), linted with
# the tools of the project's .venv (ci/setup-venv): jactionlint and
# check-jsonschema's GitLab CI schema. ci.workflows_lint fails when a file
# has a problem or the tools are missing; ci.workflows_lint_catches proves
# that the linters fail on known errors injected into copies of the files.
# Neither needs a build nor the network, and neither writes into the tree.
add_test(NAME ci.workflows_lint
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ci/lint-workflows)
add_test(NAME ci.workflows_lint_catches
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ci/lint-workflows --self-test)
set_tests_properties(ci.workflows_lint ci.workflows_lint_catches PROPERTIES
  LABELS "report;ci" TIMEOUT 120)
