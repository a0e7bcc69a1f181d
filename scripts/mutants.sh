#!/bin/sh
# Mutation testing of turnstile's core (the session actor, the registry, the stores) with
# cargo-mutants: each mutant is a small change to the code (a condition flipped, a body
# replaced); a mutant the tests do not catch marks a behaviour no test pins.
#
# A check to run before a release, not in CI: the whole set is about 1,100 mutants, and each
# one rebuilds the crate and runs the suite (hours on two cores). See docs/mutants.md for how
# to read the results and for the survivors already judged acceptable.
#
# Usage: scripts/mutants.sh [cargo-mutants options…]
#   MUTANTS_BUDGET   wall-clock budget for the whole run (default 8h; `timeout` syntax). When it
#                    runs out the run stops; what was tested so far is in mutants.out/.
#   MUTANTS_TIMEOUT  seconds one mutant's tests may take before it counts as a timeout
#                    (default 300).
# Extra options go to cargo-mutants, for example `--shard 1/4` to split the run across machines,
# `--in-diff changes.diff` for the lines a change touched, or `--file src/registry/supervisor.rs`
# to add a file (the ones below stay).
#
# Needs `cargo install cargo-mutants --locked` and redis-server (the Redis store's tests).
set -eu
cd "$(dirname "$0")/.."

if ! command -v cargo-mutants >/dev/null 2>&1; then
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
fi

exec timeout "${MUTANTS_BUDGET:-8h}" cargo mutants \
    --all-features \
    --file 'src/session.rs' --file 'src/session/**' \
    --file 'src/registry.rs' --file 'src/registry/**' \
    --file 'src/store.rs' --file 'src/store/**' \
    --file 'src/backend.rs' --file 'src/backend/**' \
    --exclude 'src/store/conformance.rs' \
    --timeout "${MUTANTS_TIMEOUT:-300}" \
    "$@"
