/* Python 3: `python -I -B -u -c BOOT`. BOOT reads fd 3 (preload length,
 * preload, code), runs them as __main__, and prints uncaught exceptions
 * without its own frame and with source lines (the C hook cannot find them,
 * the code has no file). -I ignores PYTHON* variables, user site and the
 * working directory on sys.path; -B writes no bytecode; -u keeps output
 * printed before a kill. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "ipc/proto.h"
#include "runtime/runtime.h"

static const char python_boot[] =
        "def _lockbox_main():\n"
        "    import sys\n"
        "    g = sys.modules['__main__'].__dict__\n"
        "    del g['_lockbox_main']\n"
        "    with open(3, 'rb') as f:\n"
        "        data = f.read()\n"
        "    n = int.from_bytes(data[:8], 'little')\n"
        "    parts = (('<preload>', data[8:8 + n]), ('<code>', data[8 + n:]))\n"
        "    del data\n"
        "    for name, src in parts:\n"
        "        if not src:\n"
        "            continue\n"
        "        try:\n"
        "            exec(compile(src, name, 'exec'), g)\n"
        "        except SystemExit:\n"
        "            raise\n"
        "        except BaseException as e:\n"
        "            import linecache\n"
        "            text = src.decode('utf-8', 'replace')\n"
        "            linecache.cache[name] = (len(text), None, text.splitlines(True), name)\n"
        "            e.__traceback__ = e.__traceback__.tb_next\n"
        "            hook = sys.excepthook\n"
        "            if hook is sys.__excepthook__:\n"
        "                import traceback\n"
        "                hook = traceback.print_exception\n"
        "            hook(type(e), e, e.__traceback__)\n"
        "            sys.exit(1)\n"
        "_lockbox_main()\n";

/* Nothing beyond the common policy: CPython's needs are the baseline. */
static const char *const python_allow[] = {NULL};

int runtime_python_new(const struct config *cfg, struct runtime **ret, char *err, size_t errlen)
{
        static const char *const args[] = {"-I", "-B", "-u", "-c", python_boot};
        struct runtime *rt = calloc(1, sizeof(*rt));
        if (!rt)
                return -ENOMEM;
        rt->name = "python3";
        rt->lang = LANG_PYTHON3;
        rt->lang_allow = python_allow;
        rt->exec_path = strdup(cfg->python_path);
        rt->argv = calloc(sizeof(args) / sizeof(args[0]) + 2, sizeof(char *));
        int r = rt->exec_path && rt->argv ? 0 : -ENOMEM;
        /* argv[0] is the real path: CPython derives its prefix from it. */
        if (r == 0 && !(rt->argv[0] = strdup(cfg->python_path)))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < sizeof(args) / sizeof(args[0]); i++)
                if (!(rt->argv[i + 1] = strdup(args[i])))
                        r = -ENOMEM;
        if (r == 0)
                r = runtime_ro_paths(cfg, cfg->python_path, rt, err, errlen);
        if (r < 0) {
                if (!*err)
                        snprintf(err, errlen, "python runtime: %s", strerror(-r));
                runtime_free(rt);
                return r;
        }
        *ret = rt;
        return 0;
}
