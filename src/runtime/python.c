/* Python 3: `python -I -B -u -c BOOT` (cold), or the same BOOT in a child
 * of the zygote (warm). BOOT reads fd 3 (preload length, preload, code),
 * puts the dependency layer last on sys.path (after the standard library
 * and site-packages, so it can shadow nothing), runs preload and code as
 * __main__, prints uncaught exceptions without its own frame
 * and with source lines (the C hook cannot find them, the code has no
 * file), then ends the way Python would (non-daemon threads joined, atexit
 * handlers run, streams flushed) but without tearing the interpreter down,
 * which for a process about to vanish is only time. With CPython 3.11, no
 * thread but the main one alive at the end and threading's shutdown as it
 * was before the program ran (a program may replace it, and Python would
 * call the replacement), that shutdown comes down to the two marks it
 * would leave (the main thread stopped, no new thread-pool work), set
 * directly: its full walk wrote to ~20 of the zygote's pages, a
 * copy-on-write fault each. Its last act closes
 * stdout and stderr and writes the exit status to the report pipe (fd 5),
 * so the jailer can answer without waiting for the kernel to tear the
 * process down. -I ignores PYTHON* variables, user site and the working
 * directory on sys.path; -B writes no bytecode; -u keeps output printed
 * before a kill. */
#include "config/config.h"
#include "jail/jail.h"
#include "ipc/proto.h"
#include "runtime/runtime.h"

const char runtime_python_boot[] =
    "def _lockbox_main():\n"
    "    import sys\n"
    "    g = sys.modules['__main__'].__dict__\n"
    "    del g['_lockbox_main'], g['_lockbox_exit']\n"
    "    if '" JAIL_DEPS_PATH "' not in sys.path:\n"
    "        sys.path.append('" JAIL_DEPS_PATH "')\n"
    "    import os\n"
    "    chunks = []\n"
    "    while True:\n"
    "        chunk = os.read(3, 1 << 16)\n"
    "        if not chunk:\n"
    "            break\n"
    "        chunks.append(chunk)\n"
    "    os.close(3)\n"
    "    data = b''.join(chunks)\n"
    "    del chunks, chunk\n"
    "    n = int.from_bytes(data[:8], 'little')\n"
    "    parts = (('<preload>', data[8:8 + n]), ('<code>', data[8 + n:]))\n"
    "    del data\n"
    "    try:\n"
    "        for name, src in parts:\n"
    "            if not src:\n"
    "                continue\n"
    "            try:\n"
    "                exec(compile(src, name, 'exec'), g)\n"
    "            except SystemExit:\n"
    "                raise\n"
    "            except BaseException as e:\n"
    "                import linecache\n"
    "                text = src.decode('utf-8', 'replace')\n"
    "                linecache.cache[name] = (len(text), None, text.splitlines(True), name)\n"
    "                e.__traceback__ = e.__traceback__.tb_next\n"
    "                hook = sys.excepthook\n"
    "                if hook is sys.__excepthook__:\n"
    "                    import traceback\n"
    "                    hook = traceback.print_exception\n"
    "                hook(type(e), e, e.__traceback__)\n"
    "                return 1\n"
    "    except SystemExit as e:\n"
    "        if e.code is None:\n"
    "            return 0\n"
    "        if isinstance(e.code, int):\n"
    "            return e.code\n"
    "        try:\n"
    "            print(e.code, file=sys.stderr)\n"
    "        except BaseException:\n"
    "            pass\n"
    "        return 1\n"
    "    return 0\n"
    "def _lockbox_exit(rc, shutdown=getattr(__import__('sys').modules.get('threading'),\n"
    "                                        '_shutdown', None)):\n"
    "    import sys, os\n"
    "    try:\n"
    "        t = sys.modules.get('threading')\n"
    "        if t is None:\n"
    "            pass\n"
    "        elif (sys.version_info[:2] == (3, 11) and t._shutdown is shutdown\n"
    "              and len(t._active) == 1 and not t._limbo and not t._threading_atexits\n"
    "              and t._main_thread._ident == t.get_ident()):\n"
    "            t._SHUTTING_DOWN = True\n"
    "            t._main_thread._is_stopped = True\n"
    "        else:\n"
    "            t._shutdown()\n"
    "        import atexit\n"
    "        atexit._run_exitfuncs()\n"
    "    except BaseException:\n"
    "        pass\n"
    "    for f in (sys.stdout, sys.stderr):\n"
    "        try:\n"
    "            f.flush()\n"
    "        except BaseException:\n"
    "            pass\n"
    "    for fd in (1, 2):\n"
    "        try:\n"
    "            os.close(fd)\n"
    "        except OSError:\n"
    "            pass\n"
    "    try:\n"
    "        os.write(5, b'%d' % (rc & 0xff))\n"
    "    except OSError:\n"
    "        pass\n"
    "    os._exit(rc & 0xff)\n"
    "_lockbox_exit(_lockbox_main())\n";

/* Nothing beyond the common policy: CPython's needs are the baseline. */
static const char *const python_allow[] = {NULL};

int runtime_python_new(const struct config *cfg, struct runtime **ret, char *err, size_t errlen)
{
        static const char *const args[] = {"-I", "-B", "-u", "-c", runtime_python_boot};
        int r =
            runtime_new_common("python3", LANG_PYTHON3, cfg->python_path, args,
                               sizeof(args) / sizeof(args[0]), python_allow, cfg, ret, err, errlen);
        if (r == 0)
                (*ret)->exit_report = true; /* the bootstrap's last act */
        return r;
}
