#!/usr/bin/env python3
"""A tap between turnstile and a stdio MCP server, for the tests.

Usage: tap.py LOG PROGRAM ARGS...

Runs PROGRAM, relays stdin to it and its stdout back line by line, and appends every line to
LOG as it passes: `> LINE` towards the server, `< LINE` from it. The server's pid is the first
line of LOG (`pid N`). The tap exits when the server's stdout ends, with its status.
"""

import subprocess
import sys
import threading


def main():
    log_path, program = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen(program, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    log = open(log_path, "a", buffering=1)
    lock = threading.Lock()
    with lock:
        log.write(f"pid {server.pid}\n")

    def record(prefix, line):
        with lock:
            log.write(prefix + line.decode("utf-8", "replace").rstrip("\n") + "\n")

    def to_server():
        for line in sys.stdin.buffer:
            record("> ", line)
            try:
                server.stdin.write(line)
                server.stdin.flush()
            except BrokenPipeError:
                return
        server.stdin.close()

    threading.Thread(target=to_server, daemon=True).start()
    for line in server.stdout:
        record("< ", line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()
