/* The client's one error line, "lockbox: ..." on stderr, shared by the
 * option parser (lockbox.c) and the commands (run.c, health.c). */
#include <stdarg.h>
#include <stdio.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...)
{
        char line[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* One line, whatever a server message holds. */
        for (char *p = line; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        fprintf(stderr, "lockbox: %s\n", line);
}
