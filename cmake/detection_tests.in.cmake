# Read by ctest (configured from cmake/detection_tests.in.cmake): one test
# per silent-bug failpoint, `shardcheck selftest --failpoint NAME`, which
# exits 0 only if the failpoint's subset caught it and the clean run passed.
if(NOT EXISTS "@silent_failpoints_file@")
  add_test(silent_failpoints_not_built false)
  return()
endif()
file(STRINGS "@silent_failpoints_file@" failpoints)
foreach(fp ${failpoints})
  set(name "detection.${fp}")
  add_test(${name} "@shardcheck_binary@" selftest --failpoint ${fp} --quiet --force
           --ci-dir "@PROJECT_SOURCE_DIR@/scenarios/ci" --out "@detection_tests_out@/${fp}")
  set_tests_properties(${name} PROPERTIES LABELS "detection" TIMEOUT 300)
endforeach()
