# The distributed matrix: every named optimizer setup x dp {1,2,3,4} x
# {fp32, bf16}, each a ctest test that launches real rank processes through
# `shardcheck launch` and checks bitwise agreement with the reference. The
# setups come from the registry: `shardcheck optimizers --names` writes them
# after the binary is built, and ctest reads the list (as
# gtest_discover_tests does for gtest), so a new optimizer gets its tests
# without a line here.
set(optimizer_setups_file ${CMAKE_BINARY_DIR}/optimizer_setups.txt)
add_custom_command(OUTPUT ${optimizer_setups_file}
  COMMAND shardcheck optimizers --names --force --out ${optimizer_setups_file}
  DEPENDS shardcheck
  COMMENT "Listing the registry's optimizer setups for ctest"
  VERBATIM)
add_custom_target(optimizer_setups ALL DEPENDS ${optimizer_setups_file})
set(distributed_cell_script ${CMAKE_CURRENT_SOURCE_DIR}/harness/cell/distributed_cell_test.py)
set(distributed_tests_out ${CMAKE_BINARY_DIR}/test-out)
set(shardcheck_binary ${CMAKE_BINARY_DIR}/shardcheck)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/distributed_tests.in.cmake
  ${CMAKE_BINARY_DIR}/distributed_tests_include.cmake @ONLY)
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/distributed_tests_include.cmake)
