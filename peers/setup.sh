#!/usr/bin/env bash
# Create the peers venv outside the repo (so it never lands in a commit) and
# install the pinned peer libraries. Safe to run repeatedly.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${CATML_PEERS_VENV:-/work/.venv-peers}"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"

if [ ! -x "$venv/bin/python" ]; then
    echo "creating venv at $venv"
    python3 -m venv "$venv"
fi

# The stamp records which requirements.txt was installed; skip pip when it matches.
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "peers venv up to date: $venv"
    exit 0
fi

"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$req"
echo "$want" > "$stamp"
echo "peers venv ready: $venv"
