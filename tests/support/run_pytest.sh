#!/bin/sh
# run_pytest.sh PYTHON TESTS_DIR: pytest with its tmp_path folders under a
# /tmp/longhaul-test-pytest-* folder that is removed afterwards (pytest itself
# would keep its last three runs in /tmp/pytest-of-$USER).
d=$(mktemp -d /tmp/longhaul-test-pytest-XXXXXX) || exit 1
"$1" -m pytest -q -p no:cacheprovider --basetemp="$d/t" "$2"
rc=$?
rm -rf "$d"
exit $rc
