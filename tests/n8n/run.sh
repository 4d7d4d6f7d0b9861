#!/usr/bin/env bash
# The real-n8n test, opt-in (not part of the default run: n8n's install is 2.3 GB).
#
# The first run installs n8n 2.8.4 as pinned by tests/n8n/package-lock.json into tests/n8n/node_modules
# (about 4 minutes, most of it compiling sqlite3; later runs reuse it), then runs tests/n8n/test_n8n.py:
# a real attp-server over HTTP, real n8n workflows calling it through the MCP Client node and the
# agent's MCP Client Tool node over Streamable HTTP (Bearer) and SSE (X-API-Key). 20 to 40 s once
# installed. Extra arguments go to pytest. PYTHON picks the interpreter that has attp-server installed
# (default: the checkout's .venv).
#
#   tests/n8n/run.sh            # from the repository root
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
stamp=$here/node_modules/.attp-installed

want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "== installing n8n into tests/n8n/node_modules (about 4 minutes)"
    # `npm install --no-save` installs the lockfile's tree as `npm ci` would, but tolerates the optional
    # macOS/Windows builds of msgpackr-extract that some registry mirrors lack (`npm ci` then calls the
    # lockfile out of sync). Install scripts stay off (some reach for the internet); only sqlite3, which
    # n8n needs, is built, the same way under every npm version.
    rm -rf "$here/node_modules"
    npm install --prefix "$here" --no-save --ignore-scripts --no-audit --no-fund
    npm rebuild --prefix "$here" sqlite3
    echo "$want" >"$stamp"
fi

cd "$root"
ATTP_TEST_N8N=1 exec "$python" -m pytest "$here" -p no:cacheprovider -v "$@"
