/* Node.js: `node --no-addons -e BOOT`. BOOT reads fd 3 (preload length,
 * preload, code) and runs each as a CommonJS module of its own named
 * <preload> and <code>, with require, module, exports and the usual
 * globals. The code is compiled inside the module wrapper, so a script that
 * redeclares a global (function parseInt() {...}) changes only its own
 * scope; and it runs after every lock is on anyway. Before it waits for
 * the code, BOOT sets up the streams and warms the module loader, so an
 * armed process has already paid for them. --no-addons refuses
 * native addons, so process.dlopen cannot load code of the program's.
 * stdout and stderr are made blocking: Node.js otherwise buffers writes to
 * a full pipe in memory, so a program printing in a tight loop would grow
 * without bound and never reach the output cap. When the program is over
 * with exit code 0 (its 'exit' event, after the listeners it registered
 * while it ran) BOOT writes it to fd 5 and the jailer kills the process:
 * Node's own tear-down (heap unmapping, thread joins) takes longer than the
 * run. Not for other codes: Node prints an uncaught error after 'exit'. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "ipc/proto.h"
#include "runtime/runtime.h"

static const char node_boot[] =
    "'use strict';\n"
    "(() => {\n"
    "  const fs = require('fs');\n"
    "  const Module = require('module');\n"
    "  for (const s of [process.stdout, process.stderr])\n"
    "    if (s._handle && typeof s._handle.setBlocking === 'function') "
    "s._handle.setBlocking(true);\n"
    "  const warm = new Module('<warm-up>', null);\n"
    "  warm._compile(\"const { Writable } = require('stream');\" +\n"
    "    \"const sink = new Writable({ write(c, e, cb) { cb(); } });\" +\n"
    "    \"new console.Console(sink, sink).log('%s', JSON.stringify(JSON.parse(\" +\n"
    "    \"Buffer.from('eyJhIjpbMV19', 'base64').toString('utf-8'))), { b: 2 });\", '<warm-up>');\n"
    "  const data = fs.readFileSync(3);\n"
    "  fs.closeSync(3);\n"
    "  const n = Number(data.readBigUInt64LE(0));\n"
    "  const parts = [['<preload>', data.subarray(8, 8 + n)], ['<code>', data.subarray(8 + n)]];\n"
    "  for (const [name, src] of parts) {\n"
    "    if (src.length === 0) continue;\n"
    "    const m = new Module(name, null);\n"
    "    m.filename = name;\n"
    "    m.paths = Module._nodeModulePaths('/tmp');\n"
    "    if (name === '<code>') { m.id = '.'; process.mainModule = m; }\n"
    "    m._compile(src.toString('utf8'), name);\n"
    "  }\n"
    "  process.on('exit', (code) => {\n"
    "    if (code === 0) try { fs.writeSync(5, '0'); } catch (e) {}\n"
    "  });\n"
    "})();\n";

/* What V8 and libuv ask for beyond the common policy (pkey_alloc gets
 * ENOSYS and V8 goes without memory protection keys). */
static const char *const node_allow[] = {NULL};

int runtime_node_new(const struct config *cfg, struct runtime **ret, char *err, size_t errlen)
{
        static const char *const args[] = {"--no-addons", "-e", node_boot};
        int r =
            runtime_new_common("nodejs", LANG_NODEJS, cfg->nodejs_path, args,
                               sizeof(args) / sizeof(args[0]), node_allow, cfg, ret, err, errlen);
        /* child_process would only say "spawn ls EPERM": stop the run and
         * name the call instead, as dify-sandbox did. */
        if (r == 0) {
                (*ret)->spawn_kills = true;
                (*ret)->exit_report = true;
        }
        return r;
}
