#!/usr/bin/env bash
# The test suite on a fresh machine: installs what the tests need when it is missing (Debian
# packages through apt-get, npm and PyPI packages, pinned), then runs `cargo test
# --all-features` with any arguments given (`scripts/test.sh --test NAME`, say). Run as root, or
# with the services and packages below already installed; CI runs it from .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# npm and pip install the packages below; Debian's own Python refuses pip installs outside a
# virtual environment (PEP 668) unless told, which is fine on a machine that runs tests.
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip
fi
export PIP_BREAK_SYSTEM_PACKAGES=1

# The Redis store's tests start their own redis-server on a free loopback port.
if ! command -v redis-server >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

# The deployment test (tests/haproxy_rolling_restart_loses_no_turn.rs) runs the real HAProxy
# with examples/deploy/haproxy.cfg.
if ! command -v haproxy >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy
fi

# The page tests (tests/console_*) drive a real headless Chromium over chromedriver.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi

# The PostgreSQL store's tests create (and drop) a database of their own on the server at
# $TURNSTILE_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test); they fail, never
# skip, when it cannot be reached. CI starts PostgreSQL before this script; if it is not running,
# start it, installing it first when absent.
if ! pg_isready -q -h 127.0.0.1 2>/dev/null; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
    fresh_postgres=1
  fi
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -n | tail -1)" main start \
    || true
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 && break
    sleep 1
  done
  pg_isready -h 127.0.0.1 || { echo "PostgreSQL did not start on 127.0.0.1" >&2; exit 1; }
  if [ "${fresh_postgres:-0}" = 1 ] && [ -z "${TURNSTILE_TEST_POSTGRES:-}" ]; then
    # A fresh cluster asks for a password over TCP and has no `test` database.
    su postgres -c "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\""
    export TURNSTILE_TEST_POSTGRES=postgres://postgres:postgres@127.0.0.1:5432/postgres
  fi
fi

# tests/postgres_store_speaks_tls_as_sslmode_says.rs starts a private PostgreSQL server of its own
# with TLS on: initdb, postgres and pg_ctl from /usr/lib/postgresql/*/bin (or
# $TURNSTILE_TEST_PG_BIN), run as the `postgres` user through runuser when CI runs as root. A
# server CI started elsewhere (a service container) does not bring them: install the package.
if [ -z "${TURNSTILE_TEST_PG_BIN:-}" ] && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
fi

# The MCP tests (tests/mcp_*) run the reference MCP servers: server-everything from npm (over
# stdio and Streamable HTTP) and mcp-server-time from PyPI (which brings the Python SDK `mcp`
# that tests/support/mcp/fixture.py is built on). Pinned; installed when missing or another
# version is there.
MCP_EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
MCP_TIME_VERSION="2026.10.19"
MCP_PYTHON_SDK_VERSION="2.3.0"
if ! npm ls -g --depth=0 "$MCP_EVERYTHING" >/dev/null 2>&1; then
  npm install -g --no-fund --no-audit "$MCP_EVERYTHING"
fi
if [ "$(python3 -m pip show mcp-server-time 2>/dev/null | sed -n 's/^Version: //p')" != "$MCP_TIME_VERSION" ] \
  || [ "$(python3 -m pip show mcp 2>/dev/null | sed -n 's/^Version: //p')" != "$MCP_PYTHON_SDK_VERSION" ]; then
  python3 -m pip install --quiet "mcp-server-time==$MCP_TIME_VERSION" "mcp==$MCP_PYTHON_SDK_VERSION"
fi
# The OpenAI front door's tests (tests/openai_sdk_*) drive `serve` with the official `openai`
# Python package. Pinned; installed when missing or another version is there.
OPENAI_PYTHON_VERSION="3.60.0"
if [ "$(python3 -m pip show openai 2>/dev/null | sed -n 's/^Version: //p')" != "$OPENAI_PYTHON_VERSION" ]; then
  python3 -m pip install --quiet "openai==$OPENAI_PYTHON_VERSION"
fi
# The frameworks people build on the SDK, driving the same routes (tests/openai_langchain_*,
# tests/openai_agents_sdk_*): LangChain's ChatOpenAI and the OpenAI Agents SDK. Pinned; they
# take the openai package pinned above.
LANGCHAIN_OPENAI_VERSION="1.8.1"
OPENAI_AGENTS_VERSION="0.24.0"
if [ "$(python3 -m pip show langchain-openai 2>/dev/null | sed -n 's/^Version: //p')" != "$LANGCHAIN_OPENAI_VERSION" ] \
  || [ "$(python3 -m pip show openai-agents 2>/dev/null | sed -n 's/^Version: //p')" != "$OPENAI_AGENTS_VERSION" ]; then
  python3 -m pip install --quiet "langchain-openai==$LANGCHAIN_OPENAI_VERSION" \
    "openai-agents==$OPENAI_AGENTS_VERSION" "openai==$OPENAI_PYTHON_VERSION" \
    "mcp==$MCP_PYTHON_SDK_VERSION"
fi
# The channel adapters' tests (tests/channels_*) build the platforms' requests with their own
# SDKs (tests/support/channels/platforms.py): python-telegram-bot's Update objects, slack_sdk's
# request signing and PyNaCl's Ed25519 (as Discord signs). Pinned.
PTB_VERSION="22.8"
SLACK_SDK_VERSION="3.48.0"
PYNACL_VERSION="1.6.2"
if [ "$(python3 -m pip show python-telegram-bot 2>/dev/null | sed -n 's/^Version: //p')" != "$PTB_VERSION" ] \
  || [ "$(python3 -m pip show slack_sdk 2>/dev/null | sed -n 's/^Version: //p')" != "$SLACK_SDK_VERSION" ] \
  || [ "$(python3 -m pip show pynacl 2>/dev/null | sed -n 's/^Version: //p')" != "$PYNACL_VERSION" ]; then
  python3 -m pip install --quiet "python-telegram-bot==$PTB_VERSION" \
    "slack_sdk==$SLACK_SDK_VERSION" "PyNaCl==$PYNACL_VERSION"
fi
command -v pyenv >/dev/null 2>&1 && pyenv rehash
# The same routes with the official `openai` npm package (tests/openai_node_sdk_*), read from
# the global npm folder (tests/support/openai_sdk.rs, OPENAI_NPM_PACKAGE). Pinned.
OPENAI_NPM="openai@7.60.0"
if ! npm ls -g --depth=0 "$OPENAI_NPM" >/dev/null 2>&1; then
  npm install -g --no-fund --no-audit "$OPENAI_NPM"
fi

# The page tests (tests/console_*) run axe-core in Chromium for accessibility; pinned, read from
# the global npm folder (tests/support/browser.rs, AXE_CORE_VERSION).
AXE_CORE="axe-core@4.14.1"
if ! npm ls -g --depth=0 "$AXE_CORE" >/dev/null 2>&1; then
  npm install -g --no-fund --no-audit "$AXE_CORE"
fi

# A clean checkout gains nothing from incremental compilation, which would double the build's
# disk use (the test binaries' incremental caches alone take tens of GB).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
exec cargo test --all-features "$@"
