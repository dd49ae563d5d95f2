# The distributed matrix: every optimizer setup x dp {1,2,3,4} x {fp32, bf16},
# each a separate ctest test that launches real rank processes through
# `shardcheck launch` and checks bitwise agreement with the reference.
foreach(opt adam adamw lion muon_adam muon_lion)
  foreach(dp 1 2 3 4)
    foreach(dtype fp32 bf16)
      set(name "distributed.${opt}.dp${dp}.${dtype}")
      add_test(NAME ${name}
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/harness/distributed_cell_test.py
                $<TARGET_FILE:shardcheck> ${dp} ${opt} ${dtype}
                ${CMAKE_BINARY_DIR}/test-out/${name})
      set_tests_properties(${name} PROPERTIES
        LABELS "distributed;${opt};dp${dp};${dtype}"
        PROCESSORS ${dp}
        TIMEOUT 300)
    endforeach()
  endforeach()
endforeach()
