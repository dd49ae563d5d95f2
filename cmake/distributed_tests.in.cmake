# Read by ctest (configured from cmake/distributed_tests.in.cmake): one test
# per (optimizer setup, dp, dtype) of the distributed matrix.
if(NOT EXISTS "@optimizer_setups_file@")
  add_test(optimizer_setups_not_built false)
  return()
endif()
file(STRINGS "@optimizer_setups_file@" setups)
foreach(opt ${setups})
  foreach(dp 1 2 3 4)
    foreach(dtype fp32 bf16)
      set(name "distributed.${opt}.dp${dp}.${dtype}")
      add_test(${name} /usr/bin/python3 "@distributed_cell_script@" "@shardcheck_binary@" ${dp} ${opt} ${dtype}
               "@distributed_tests_out@/${name}")
      set_tests_properties(${name} PROPERTIES LABELS "distributed;${opt};dp${dp};${dtype}" PROCESSORS ${dp}
                           TIMEOUT 300)
    endforeach()
  endforeach()
endforeach()
