#!/bin/sh
# test_python: pytest of python/tests in the venv the build made
# (cmake/venv.cmake). No venv, or a failed install, fails the test with
# the build's log instead of skipping it.
venv=$1
tests=$2
if [ ! -f "$venv/.raybox-stamp" ]; then
  echo "test_python: FAILED: the build could not make $venv (python3-venv," >&2
  echo "python3-dev, PyPI, the package build); its log, $venv.log:" >&2
  cat "$venv.log" >&2 2>/dev/null
  exit 1
fi
cd "$tests" || exit 1
# The batches and answers of the run go under $RAYBOX_PY_TMP (the build's
# python-tests/, emptied by pytest at the start) when ctest sets it.
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  ${RAYBOX_PY_TMP:+--basetemp="$RAYBOX_PY_TMP"} "$tests"
