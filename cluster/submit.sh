#!/bin/bash
# Submit a sweep to a running Ray cluster as a Ray Job: the driver runs on the head node, so closing this
# terminal does not stop the sweep. This checkout is uploaded as the job's working directory, which Ray puts
# on every worker's path, so `sweep` and `analysis` import without installing them; the dependencies must be
# on the nodes already (the launcher configs here run `pip install -q -e .` in their setup_commands).
# Results must go to storage every node can reach.
#   RAY_ADDRESS=http://HEAD:8265 bash cluster/submit.sh SPACE STORAGE [more stitchsweep run options]
#   ray job logs --follow JOB_ID ; ray job stop JOB_ID
set -euo pipefail
# Ray 2.60 clusters started by `ray start --head` check a token; a client sends it (RAY_AUTH_TOKEN, or the file
# ~/.ray/auth_token) only in token mode, which also works against a cluster without authentication.
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}
SPACE=${1:?usage: cluster/submit.sh SPACE STORAGE [options]}
STORAGE=${2:?usage: cluster/submit.sh SPACE STORAGE [options]}
shift 2
exec ray job submit --working-dir . \
    -- python -m sweep run "$SPACE" --address auto --storage "$STORAGE" "$@"
