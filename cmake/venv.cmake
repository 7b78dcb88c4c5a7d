# cmake -DPYTHON=... -DVENV=DIR -DREQUIREMENTS=FILE -DSTAMP=FILE
#       [-DTEST_NAME=name] [-DPACKAGE=DIR -DPACKAGE_BUILD_DIR=DIR] -P venv.cmake
#
# Makes the Python venv of a test (TEST_NAME, default test_schemathesis):
# python3 -m venv, then pip install -r REQUIREMENTS, then with PACKAGE
# pip install of that directory (test_python: python/, built in place by
# scikit-build-core with the venv's own build requirements, incrementally
# in PACKAGE_BUILD_DIR). A failure (no python3-venv, no PyPI, a failed
# build) does not fail the build: it is written to VENV.log and the test
# fails with it, so it is never skipped in silence. STAMP is written only
# on success, so the next build tries again.
if(NOT TEST_NAME)
  set(TEST_NAME test_schemathesis)
endif()
file(REMOVE "${STAMP}")
set(log "${VENV}.log")
file(WRITE "${log}" "")
macro(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  string(JOIN " " cmdline ${ARGN})
  file(APPEND "${log}" "$ ${cmdline}\n${out}\n")
  if(NOT rc EQUAL 0)
    file(APPEND "${log}" "failed: ${rc}\n")
    message(WARNING "${TEST_NAME}: could not make ${VENV} (see ${log}); "
                    "the test will fail until a build makes it")
    return()
  endif()
endmacro()
if(NOT PYTHON)
  file(APPEND "${log}" "no python3 found by CMake\n")
  message(WARNING "${TEST_NAME}: no python3; the test will fail")
  return()
endif()
if(NOT EXISTS "${VENV}/bin/pip")
  file(REMOVE_RECURSE "${VENV}")
  step("${PYTHON}" -m venv "${VENV}")
endif()
step("${VENV}/bin/pip" install --disable-pip-version-check --quiet
     --retries 2 --timeout 30 -r "${REQUIREMENTS}")
if(PACKAGE)
  step("${VENV}/bin/pip" install --disable-pip-version-check --quiet
       --no-build-isolation --no-deps --force-reinstall
       -C "build-dir=${PACKAGE_BUILD_DIR}" "${PACKAGE}")
endif()
file(WRITE "${STAMP}" "ok\n")
