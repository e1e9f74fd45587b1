# dualrail-check on a lab of its own (prefix drchk by default, brought up and removed by
# the script): a healthy lab, slow links, a black-holed link, mis-cabled nodes
# (lab.sh up --miscable), bad options. Serialised with every other lab test.
add_test(NAME lab_check
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_test.sh $<TARGET_FILE:dualrail-check>)
set_tests_properties(lab_check PROPERTIES TIMEOUT 900 LABELS lab RESOURCE_LOCK lab
  ENVIRONMENT "DUALRAIL_LAB_PREFIX=${DR_CHECK_LAB_PREFIX};DUALRAIL_BUILD_DIR=${PROJECT_BINARY_DIR}")
