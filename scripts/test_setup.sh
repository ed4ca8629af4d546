#!/usr/bin/env bash
# Everything the test suite needs beyond `pip install ".[test,data,wordnet]"`:
#   - the offline datasets (scripts/fetch_data.sh: unpacked into the cache, nothing installed);
#   - a headless Chromium and its driver (Debian's chromium + chromium-driver) for the test that
#     opens a report in a real browser. Installed only when missing and only as root with
#     apt-get; elsewhere that one test skips (and fails under CI=true, so CI cannot skip it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch_data.sh
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing chromium and chromium-driver for the browser test (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
    else
        echo "note: chromium/chromedriver missing and not root: the browser test will skip" >&2
    fi
fi
