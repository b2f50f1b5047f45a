"""What a lockboxd left on the host, read from /proc and the file system:
processes by parent or UID range, lockbox mounts, files owned by sandbox
UIDs. Plain functions, no pytest: the integration and attack fixtures use
them after every test, and bench/soak.py after its run."""
import os


def proc_status(pid):
    """/proc/PID/status as a dict, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def _pids():
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def processes_in_uid_range(lo, hi):
    """[(pid, name, uids)] of every process whose real/effective/saved/fs
    UID is in [lo, hi]."""
    found = []
    for pid in _pids():
        st = proc_status(pid)
        if not st or "Uid" not in st:
            continue
        uids = [int(x) for x in st["Uid"].split()]
        if any(lo <= u <= hi for u in uids):
            found.append((pid, st.get("Name"), uids))
    return found


def children_of(pid):
    return [k for k in _pids() if (proc_status(k) or {}).get("PPid") == str(pid)]


def lockbox_mounts():
    with open("/proc/self/mountinfo") as f:
        return {line for line in f if "lockbox" in line}


def files_owned_in_range(lo, hi, roots=("/tmp", "/var/tmp", "/dev/shm", "/run")):
    """Paths (three levels deep at most) under roots owned by a UID in [lo, hi]."""
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
            if dirpath.count(os.sep) - root.count(os.sep) >= 3:
                dirnames[:] = []
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                try:
                    uid = os.lstat(p).st_uid
                except OSError:
                    continue
                if lo <= uid <= hi:
                    found.append(p)
    return found


CGROUP_ROOT = "/sys/fs/cgroup"


def daemon_cgroups(pid):
    """The cgroups a running lockboxd made, from /proc/PID/cgroup:
    ({hierarchy: its lockbox.<pid> group, which holds the uid-N slots},
    [other groups it made]). cgroup v1: {"memory": ..., "pids": ...}, [].
    cgroup v2: {"unified": .../lockbox.<pid>}, [.../lockboxd.<pid>, the leaf
    the daemon moved itself into]."""
    slots, own = {}, []
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            path = path.rstrip("/")
            if ctrls == "":
                if path.endswith(f"/lockboxd.{pid}"):
                    base = CGROUP_ROOT + os.path.dirname(path).rstrip("/")
                    own.append(CGROUP_ROOT + path)
                    slots["unified"] = os.path.join(base, f"lockbox.{pid}")
                continue
            for c in ctrls.split(","):
                if c in ("memory", "pids"):
                    slots[c] = os.path.join(CGROUP_ROOT, c) + path + f"/lockbox.{pid}"
    return slots, own
