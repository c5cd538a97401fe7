# helpers/procfs.py: what the curlpipe tests written in Python ask of
# /proc about a process they started.
# Copyright the nbdkit-curl-plugin authors.  BSD-3-Clause, see COPYING.
#
# The tests run their Python with PYTHONPATH=$helpers_srcdir
# (tests/functions.sh) and import it.

import os
import time


def has_socket(pid):
    """Whether process PID holds a socket (curlpipe has connected)."""
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
                return True
        except OSError:
            pass
    return False


def wait_connected(pid, seconds=10):
    """Wait, at most SECONDS, until process PID holds a socket."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and not has_socket(pid):
        time.sleep(0.02)
