"""What scripts/compare-builds.py and scripts/compare-stores.py share: the report of one
`turnstile load --json` run, and the turns it says went wrong."""
import json

FAULTS = ("lost", "duplicated", "reordered", "misanswered")


def faults(report):
    """How many turns the report says were lost, duplicated, reordered or misanswered."""
    return sum(report.get(field) or 0 for field in FAULTS)


def report_of(done):
    """The report of a finished `turnstile load --json` run (a `subprocess.CompletedProcess`),
    or None when the run failed without one.

    `turnstile load` exits 1 when a turn went wrong, with its report still on stdout: that report
    is kept, so that the faults are counted and reported rather than lost behind the exit status.
    """
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    if not isinstance(report, dict):
        return None
    if done.returncode == 0 or (done.returncode == 1 and faults(report)):
        return report
    return None
