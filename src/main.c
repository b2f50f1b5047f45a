/* lockboxd: load the configuration, prepare the jail as root, then split
 * into the unprivileged HTTP process and the root jailer (see
 * docs/ARCHITECTURE.md "Processes"). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "base/version.h"
#include "daemon/daemon.h"
#include "daemon/http_exec.h"

static void usage(FILE *out)
{
        fprintf(out, "usage: lockboxd [--config PATH] [--check-config] [--dump-config] "
                     "[--config-doc] [--check-http-confinement] [--version]\n");
}

struct args {
        const char *config;
        bool check, dump, doc, confinement;
};

static int parse_args(int argc, char **argv, struct args *a)
{
        static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                             {"check-config", no_argument, NULL, 'k'},
                                             {"dump-config", no_argument, NULL, 'd'},
                                             {"config-doc", no_argument, NULL, 'D'},
                                             {"version", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"check-http-confinement", no_argument, NULL, 'H'},
                                             {NULL, 0, NULL, 0}};
        *a = (struct args){.config = "conf/config.yaml"};
        int c;
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        a->config = optarg;
                        break;
                case 'k':
                        a->check = true;
                        break;
                case 'd':
                        a->dump = true;
                        break;
                case 'D':
                        a->doc = true;
                        break;
                case 'H':
                        a->confinement = true;
                        break;
                case 'v':
                        printf("lockboxd %s\n", LOCKBOX_VERSION);
                        exit(0);
                case 'h':
                        usage(stdout);
                        exit(0);
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        return optind == argc ? 0 : -EINVAL;
}

static const char *env_lookup(const char *name)
{
        return getenv(name);
}

/* With log_path set, lines also go to <log_path>/lockboxd.log. */
static int open_log(const struct config *cfg, char *err, size_t errlen)
{
        log_setup("main", cfg->debug, -1);
        log_set_json(strcmp(cfg->log_format, "json") == 0);
        if (!*cfg->log_path)
                return 0;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/lockboxd.log", cfg->log_path) >=
            sizeof(path)) {
                snprintf(err, errlen, "log_path: too long");
                return -ENAMETOOLONG;
        }
        (void)mkdir(cfg->log_path, 0750); /* the open below reports failures */
        int r = log_open_file(path);
        /* a message cut at errlen is still one line that says what failed */
        if (r < 0 && (size_t)snprintf(err, errlen, "log_path: cannot open %s: %s", path,
                                      strerror(-r)) >= errlen)
                log_debug(NULL, "main.error_cut", "path=%s", log_q(path));
        return r;
}

int main(int argc, char **argv)
{
        /* lockboxd re-executes itself as its HTTP process (http_exec.h) */
        if (argc == 2 && strncmp(argv[1], "--http=", 7) == 0) {
                /* _exit: no atexit handlers, which may do what its filter
                 * forbids (LeakSanitizer's checker is a new process) */
                int code = http_exec_main(atoi(argv[1] + 7));
                fflush(NULL);
                _exit(code);
        }
        struct args a;
        if (parse_args(argc, argv, &a) < 0)
                return 2;
        if (a.doc) {
                config_doc(stdout);
                return 0;
        }
        struct config cfg;
        char err[512] = "";
        if (config_load(&cfg, a.config, env_lookup, err, sizeof(err)) < 0) {
                fprintf(stderr, "lockboxd: %s\n", err);
                return 2;
        }
        if (a.confinement) {
                int code = http_exec_check(&cfg);
                config_free(&cfg);
                return code;
        }
        if (a.dump)
                config_dump(&cfg, stdout);
        if (a.check || a.dump) {
                if (a.check)
                        printf("lockboxd: %s: configuration is valid\n", a.config);
                config_free(&cfg);
                return 0;
        }
        int r = open_log(&cfg, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "lockboxd: %s\n", err);
                config_free(&cfg);
                return 1;
        }
        int code = daemon_main(&cfg, err, sizeof(err));
        if (code != 0 && *err)
                fprintf(stderr, "lockboxd: %s\n", err);
        config_free(&cfg);
        return code;
}
