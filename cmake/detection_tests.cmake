# Detection power (docs/detection.md): one ctest per silent-bug failpoint,
# asserting that the scenarios/ci subset recorded for it
# (harness/detection/detection_plan.cc) catches it, and that a misspelt
# failpoint is refused. The names come from `shardcheck selftest --names`
# after the binary is built, so a new failpoint gets its test without a
# line here. Label: detection.
set(silent_failpoints_file ${CMAKE_BINARY_DIR}/silent_failpoints.txt)
add_custom_command(OUTPUT ${silent_failpoints_file}
  COMMAND shardcheck selftest --force --names ${silent_failpoints_file}
  DEPENDS shardcheck
  COMMENT "Listing the silent-bug failpoints for ctest"
  VERBATIM)
add_custom_target(silent_failpoints ALL DEPENDS ${silent_failpoints_file})
set(detection_tests_out ${CMAKE_BINARY_DIR}/detection-out)
set(shardcheck_binary ${CMAKE_BINARY_DIR}/shardcheck)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/detection_tests.in.cmake
  ${CMAKE_BINARY_DIR}/detection_tests_include.cmake @ONLY)
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/detection_tests_include.cmake)

add_test(NAME detection.unknown_failpoint_refused
  COMMAND /bin/sh ${PROJECT_SOURCE_DIR}/harness/detection/unknown_failpoint_test.sh
          $<TARGET_FILE:shardcheck> ${CMAKE_BINARY_DIR}/detection-out/unknown
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(detection.unknown_failpoint_refused PROPERTIES LABELS "detection" TIMEOUT 120)
