"""Escaping the root and writing where the run must not: symlinks, hard
links, '..', /proc/*/root, inherited descriptors, classic chroot escapes,
writes outside /tmp, files persisted for the next run. (Filling /tmp: see
test_attack_resources.py.)"""
import json

import pytest

from attacklib import PY_SYSCALL, assert_denied, assert_ok, attack_js, attack_py, errno_lines, src

DENIED_WRITE = {"EROFS", "EACCES", "EPERM", "ENOENT"}
# Device nodes are exempt from a read-only mount (the kernel checks only
# regular files and directories against MNT_READONLY): /dev/random and
# /dev/urandom, bound "read-only", accept writes, which only stir the
# kernel's pool (crediting entropy needs CAP_SYS_ADMIN). Harmless.
HARMLESS_WRITES = {"append /dev/random", "append /dev/urandom"}


# ------------------------------------------------------------ escaping root

@pytest.mark.host_view
def test_python_symlinks_resolve_inside_the_jail(daemon):
    d = attack_py(daemon, src(f"""
        import os, errno
        targets = {{'shadow': '/etc/shadow', 'config': {daemon.config_path!r},
                   'root_home': '/root', 'proc_root': '/proc/1/root/etc/shadow',
                   'dotdot': '../../../../../../etc/shadow', 'host_tmp': {daemon.workdir!r}}}
        for name, t in targets.items():
            os.symlink(t, '/tmp/' + name)
            try:
                open('/tmp/' + name).read()
                print(name, 'READ')
            except OSError as e:
                print(name, errno.errorcode[e.errno])
    """))
    assert_ok(d)
    got = errno_lines(d)
    assert set(got) == {"shadow", "config", "root_home", "proc_root", "dotdot", "host_tmp"}, d
    assert set(got.values()) <= {"ENOENT"}, d


def test_python_hard_links_cannot_cross_into_tmp(daemon):
    """Linking files of the read-only root (the generated passwd, the
    interpreter, a device) into the writable /tmp fails: another filesystem."""
    d = attack_py(daemon, src("""
        import os, errno
        for src in ('/etc/passwd', '/usr/bin/python3', '/dev/null', '/proc/self/fd/1', '/proc/1/exe'):
            try:
                os.link(src, '/tmp/l' + str(abs(hash(src))), follow_symlinks=False)
                print(src, 'LINKED')
            except OSError as e:
                print(src, errno.errorcode[e.errno])
    """))
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) == 5 and set(got.values()) <= {"EXDEV", "EPERM", "EACCES", "ENOENT"}, d


def test_python_dotdot_and_proc_root_stay_at_the_jail_root(daemon):
    d = attack_py(daemon, src("""
        import os
        os.chdir('/tmp')
        for _ in range(50):
            os.chdir('..')
        here = sorted(os.listdir('.'))
        print(os.getcwd(), here == sorted(os.listdir('/')))
        print(os.readlink('/proc/1/root'), os.readlink('/proc/self/root'),
              sorted(os.listdir('/proc/1/root/../../..')) == here)
        print(os.path.samestat(os.stat('/proc/1/root/..'), os.stat('/')))
        print('shadow' in os.listdir('/etc'), os.path.exists('/home'), os.path.exists('/var'))
    """))
    assert_ok(d, "/ True\n/ / True\nTrue\nFalse False False\n")


def test_python_no_descriptor_of_the_parent_is_inherited(daemon):
    """Only 0 (/dev/null), 1 and 2 (pipes) and 5 (the pipe the bootstrap
    reports the exit status on) are open; none is a directory (fchdir/openat
    escape) or a socket; fchdir through each fails."""
    d = attack_py(daemon, src("""
        import os, stat, fcntl
        open_fds = []
        for fd in range(0, 4096):
            try:
                fcntl.fcntl(fd, fcntl.F_GETFD)
            except OSError:
                continue
            open_fds.append(fd)
        kinds = []
        for fd in open_fds:
            m = os.fstat(fd).st_mode
            kinds.append('chr' if stat.S_ISCHR(m) else 'fifo' if stat.S_ISFIFO(m) else
                         'dir' if stat.S_ISDIR(m) else 'sock' if stat.S_ISSOCK(m) else 'other')
            try:
                os.fchdir(fd)
                kinds[-1] += '+CHDIR'
            except OSError:
                pass
        print(open_fds, kinds)
    """))
    assert_ok(d, "[0, 1, 2, 5] ['chr', 'fifo', 'fifo', 'fifo']\n")


def test_node_no_descriptor_of_the_parent_is_inherited(daemon):
    """Node's own fds (event loop, pipes it made) and the exit-report pipe:
    no socket, no directory, no file of the host."""
    d = attack_js(daemon, src("""
        const fs = require('fs');
        const bad = [];
        for (const f of fs.readdirSync('/proc/self/fd')) {
            let t; try { t = fs.readlinkSync('/proc/self/fd/' + f); } catch (e) { continue; }
            if (!/^(pipe:\\[\\d+\\]|anon_inode:\\[(eventfd|eventpoll|timerfd)\\]|\\/dev\\/null)$/.test(t)) bad.push(f + ' ' + t);
        }
        console.log(JSON.stringify(bad));
    """))
    assert_ok(d, "[]\n")


@pytest.mark.parametrize("name,code,syscall", [
    ("chroot_classic", "import os\nos.mkdir('/tmp/j')\nos.chroot('/tmp/j')\nfor _ in range(20): os.chdir('..')\nos.chroot('.')", "chroot"),
    ("pivot_root", PY_SYSCALL + "os_ = __import__('os'); os_.mkdir('/tmp/n'); print(sc(155, 0, 0))", "pivot_root"),
    ("open_by_handle_at_shocker", PY_SYSCALL + "print(sc(304, 0, 0, 0))", "open_by_handle_at"),
    ("name_to_handle_at", PY_SYSCALL + "print(sc(303, -100, 0, 0, 0, 0))", "name_to_handle_at"),
    ("mount_bind_host", "import ctypes\nctypes.CDLL(None).mount(b'/proc/1/root', b'/tmp', None, 4096, None)", "mount"),
    ("setns_mnt", "import ctypes, os\nctypes.CDLL(None).setns(os.open('/proc/1/ns/mnt', os.O_RDONLY), 0)", "setns"),
    ("fsopen_new_mount_api", PY_SYSCALL + "print(sc(430, 0, 0))", "fsopen"),
    ("open_tree_clone", PY_SYSCALL + "print(sc(428, -100, 0, 1))", "open_tree"),
])
def test_python_classic_root_escapes_stop_the_run(daemon, name, code, syscall):
    d = attack_py(daemon, "print('pre', flush=True)\n" + code + "\nprint('ESCAPED')\n")
    assert_denied(d, syscall, stdout="pre\n")


def test_python_device_nodes_cannot_be_made(daemon):
    d = attack_py(daemon, src("""
        import os, stat, errno
        for name, mode, dev in (('sda', stat.S_IFBLK, os.makedev(8, 0)), ('mem', stat.S_IFCHR, os.makedev(1, 1)),
                                ('kmsg', stat.S_IFCHR, os.makedev(1, 11))):
            try:
                os.mknod('/tmp/' + name, mode | 0o666, dev)
                print(name, 'MADE')
            except OSError as e:
                print(name, errno.errorcode[e.errno])
        os.mkfifo('/tmp/fifo')   # harmless: allowed
        print('fifo', stat.S_ISFIFO(os.stat('/tmp/fifo').st_mode))
    """))
    assert_ok(d, "sda EPERM\nmem EPERM\nkmsg EPERM\nfifo True\n")


# ------------------------------------------------------------ writing outside /tmp

WRITE_PROBE_PY = src("""
    import os, errno
    out = {}
    def attempt(name, f):
        try:
            f(); out[name] = 'WROTE'
        except OSError as e:
            out[name] = errno.errorcode[e.errno]
    for d in ('/', '/etc', '/usr', '/usr/bin', '/usr/lib', '/usr/local/lib', '/dev', '/proc', '/proc/1',
              '/var', '/var/tmp', '/dev/shm', '/run', '/home', '/root'):
        attempt('create ' + d, lambda: os.close(os.open(d.rstrip('/') + '/x', os.O_CREAT | os.O_WRONLY, 0o644)))
        attempt('mkdir ' + d, lambda: os.mkdir(d.rstrip('/') + '/xd'))
    for f in ('/etc/passwd', '/etc/group', '/etc/hosts', '/etc/resolv.conf', '/usr/bin/python3',
              '/dev/random', '/dev/urandom'):
        attempt('append ' + f, lambda: os.close(os.open(f, os.O_WRONLY | os.O_APPEND)))
    attempt('chmod /etc/passwd', lambda: os.chmod('/etc/passwd', 0o666))
    attempt('chown /etc/passwd', lambda: os.chown('/etc/passwd', os.getuid(), os.getgid()))
    attempt('utime /usr/bin/python3', lambda: os.utime('/usr/bin/python3'))
    attempt('rename /etc/passwd', lambda: os.rename('/etc/passwd', '/etc/p2'))
    attempt('unlink /etc/hosts', lambda: os.unlink('/etc/hosts'))
    def lower_oom_score():
        fd = os.open('/proc/1/oom_score_adj', os.O_WRONLY)
        os.write(fd, b'-1000')
        if open('/proc/1/oom_score_adj').read().strip() != '-1000':
            raise OSError(errno.EPERM, 'not lowered')
    attempt('oom_score_adj -1000', lower_oom_score)
    for k, v in sorted(out.items()):
        print(k, v)
""")


def test_python_nothing_outside_tmp_is_writable(daemon):
    d = attack_py(daemon, WRITE_PROBE_PY)
    assert_ok(d)
    got = errno_lines(d)
    assert len(got) >= 40, d
    wrote = {k: v for k, v in got.items() if v not in DENIED_WRITE and k not in HARMLESS_WRITES}
    assert not wrote, d


def test_python_only_tmp_proc_and_two_devices_are_mounted_writable(daemon):
    d = attack_py(daemon, src("""
        import json
        rw = []
        for line in open('/proc/self/mountinfo'):
            f = line.split()
            if 'rw' in f[5].split(','):
                rw.append(f[4])
        print(json.dumps(sorted(rw)))
    """))
    assert_ok(d)
    assert set(json.loads(d["stdout"])) <= {"/tmp", "/proc", "/dev/null", "/dev/zero"}, d


def test_python_walk_finds_no_writable_directory_but_tmp(daemon):
    """Try to create a file in every directory the run can see (/usr to
    depth 4), not trusting permission bits."""
    d = attack_py(daemon, src("""
        import os
        ok, tried = [], 0
        for root, dirs, files in os.walk('/', onerror=lambda e: None):
            if root.startswith(('/proc', '/tmp/')) or root.count('/') > 4:
                dirs[:] = []
            if root.startswith('/proc'):
                continue  # covered by the write probe
            tried += 1
            p = os.path.join(root, '.lockbox-probe')
            try:
                os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                ok.append(root)
                os.unlink(p)
            except OSError:
                pass
        print(tried > 100, ok)
    """))
    assert_ok(d, "True ['/tmp']\n")


def test_node_nothing_outside_tmp_is_writable(daemon):
    d = attack_js(daemon, src("""
        const fs = require('fs');
        const res = {};
        const attempt = (k, f) => { try { f(); res[k] = 'WROTE'; } catch (e) { res[k] = e.code; } };
        for (const d of ['/', '/etc', '/usr', '/usr/lib', '/dev', '/proc', '/var', '/dev/shm', '/run', '/root'])
            attempt('write ' + d, () => fs.writeFileSync(d.replace(/\\/$/, '') + '/x', 'x'));
        for (const f of ['/etc/passwd', '/etc/hosts', '/usr/bin/node', '/dev/urandom'])
            attempt('append ' + f, () => fs.appendFileSync(f, 'x'));
        attempt('symlink escape', () => { fs.symlinkSync('/etc/shadow', '/tmp/s'); fs.readFileSync('/tmp/s'); });
        attempt('link', () => fs.linkSync('/etc/passwd', '/tmp/p'));
        attempt('dotdot', () => fs.readFileSync('/tmp/../../../etc/shadow'));
        attempt('chmod', () => fs.chmodSync('/etc/passwd', 0o666));
        attempt('rm', () => fs.rmSync('/usr/bin/node'));
        console.log(JSON.stringify(res));
    """))
    assert_ok(d)
    res = json.loads(d["stdout"])
    assert len(res) == 19, d
    wrote = {k: v for k, v in res.items() if v not in DENIED_WRITE | {"EXDEV"} and k not in HARMLESS_WRITES}
    assert not wrote, d


# ------------------------------------------------------------ persistence

PLANT_PY = src("""
    import os
    os.makedirs('/tmp/.persist/deep', exist_ok=True)
    for p in ('/tmp/.persist/deep/marker', '/tmp/marker', '/tmp/sitecustomize.py', '/tmp/json.py',
              '/tmp/.pythonrc', '/tmp/node_modules/x.js'):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'w') as f:
            f.write('print("PERSISTED")\\nraise SystemExit(7)\\n')
        os.chmod(p, 0o777)
    os.mkfifo('/tmp/fifo')
    os.chmod('/tmp', 0o777)
    print(os.getuid(), len(os.listdir('/tmp')))
""")

CHECK_PY = src("""
    import os, json
    print(os.getuid(), json.dumps(os.listdir('/tmp')), oct(os.stat('/tmp').st_mode & 0o777))
""")


def test_python_files_do_not_persist_into_later_runs(daemon):
    """A run plants files (a sitecustomize.py, a json.py shadowing a module,
    a fifo, a hidden tree) and opens /tmp to everyone; the next runs, some
    with the same UID, start with an empty private /tmp and import the real
    modules."""
    planted = attack_py(daemon, PLANT_PY)
    assert_ok(planted)
    for _ in range(12):
        d = attack_py(daemon, CHECK_PY + "import json as j\nprint(j.__file__.startswith('/usr/'))\n")
        assert_ok(d)
        first, second = d["stdout"].splitlines()
        u, listing, mode = first.split(" ", 2)
        assert (listing, mode, second) == ("[]", "0o700", "True"), d
    assert "PERSISTED" not in d["stdout"]


def test_node_files_do_not_persist_into_later_runs(daemon):
    planted = attack_js(daemon, src("""
        const fs = require('fs');
        fs.mkdirSync('/tmp/node_modules/evil', {recursive: true});
        fs.writeFileSync('/tmp/node_modules/evil/index.js', 'console.log("PERSISTED")');
        fs.writeFileSync('/tmp/marker', 'x');
        console.log(fs.readdirSync('/tmp').length);
    """))
    assert_ok(planted, "2\n")
    for _ in range(6):
        d = attack_js(daemon, src("""
            const fs = require('fs');
            let evil; try { require('evil'); evil = 'LOADED'; } catch (e) { evil = e.code; }
            console.log(JSON.stringify(fs.readdirSync('/tmp')), evil);
        """))
        assert_ok(d, "[] MODULE_NOT_FOUND\n")


def test_python_tmp_is_private_mode_0700_owned_by_the_run(daemon):
    d = attack_py(daemon, src("""
        import os
        st = os.stat('/tmp')
        print(oct(st.st_mode & 0o7777), st.st_uid == os.getuid(), st.st_gid == os.getgid())
    """))
    assert_ok(d, "0o700 True True\n")


def test_python_exec_from_tmp_is_impossible_even_by_mapping(daemon):
    """/tmp is noexec: a file there cannot be mapped executable nor loaded
    as a library or extension module."""
    d = attack_py(daemon, src("""
        import ctypes, mmap, shutil, sys, errno
        shutil.copy('/usr/lib/x86_64-linux-gnu/libz.so.1', '/tmp/libz.so')
        try:
            ctypes.CDLL('/tmp/libz.so'); print('dlopen LOADED')
        except OSError as e:
            print('dlopen', 'failed to map segment' in str(e))
        f = open('/tmp/libz.so', 'rb')
        try:
            mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC); print('mmap EXEC')
        except OSError as e:
            print('mmap', errno.errorcode[e.errno])
        import _bz2
        shutil.copy(_bz2.__file__, '/tmp/evilmod' + _bz2.__file__[_bz2.__file__.index('.cpython'):])
        sys.path.insert(0, '/tmp')
        try:
            import evilmod; print('import LOADED')
        except ImportError as e:
            print('import', 'failed to map segment' in str(e))
    """))
    assert_ok(d, "dlopen True\nmmap EPERM\nimport True\n")
