/* libFuzzer target for the config loader (src/config/): the input is a
 * YAML file whose lines "#!env NAME=VALUE" set environment variables for a
 * fake getenv and are blanked before the YAML is read (so values may hold
 * any byte but NUL and newline). A config that loads must dump as YAML
 * that loads back to the same dump (config_dump's promise). */
#include <stdarg.h>

#include "base/log.h"
#include "config/config.h"
#include "fuzz.h"

#define ENV_MAX 16
#define ENV_PREFIX "#!env "

struct env_var {
        char *name;
        char *value;
};

static struct env_var env[ENV_MAX];
static size_t n_env;

static const char *fake_getenv(const char *name)
{
        for (size_t i = 0; i < n_env; i++)
                if (strcmp(env[i].name, name) == 0)
                        return env[i].value;
        return NULL;
}

/* Takes one "#!env NAME=VALUE" line (without its newline) and blanks it
 * with spaces, keeping the YAML's line numbers; other lines stay. */
static void env_take(char *line, size_t len)
{
        size_t plen = strlen(ENV_PREFIX);
        if (len <= plen || memcmp(line, ENV_PREFIX, plen) != 0)
                return;
        const char *name = line + plen;
        const char *eq = memchr(name, '=', len - plen);
        if (eq && n_env < ENV_MAX) {
                size_t nlen = (size_t)(eq - name);
                env[n_env].name = fuzz_strndup((const uint8_t *)name, nlen);
                env[n_env].value = fuzz_strndup((const uint8_t *)eq + 1, len - plen - nlen - 1);
                n_env++;
        }
        memset(line, ' ', len);
}

static void env_load(char *text, size_t len)
{
        for (size_t pos = 0; pos < len;) {
                char *nl = memchr(text + pos, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
                env_take(text + pos, n);
                pos += n + 1;
        }
}

static void env_clear(void)
{
        for (size_t i = 0; i < n_env; i++) {
                free(env[i].name);
                free(env[i].value);
        }
        n_env = 0;
}

/* The effective values as config_dump() writes them (malloc'd). */
static char *dump_text(const struct config *cfg, size_t *ret_len)
{
        char *text = NULL;
        FILE *f = open_memstream(&text, ret_len);
        FUZZ_ASSERT(f);
        config_dump(cfg, f);
        FUZZ_ASSERT(fclose(f) == 0);
        return text;
}

/* The dump is a config file of its own that dumps the same again. */
static void check_round_trip(const struct config *cfg)
{
        struct config again;
        char err[512];
        size_t len, len2;
        char *text = dump_text(cfg, &len);
        int r = config_load_buffer(&again, "dump.yaml", text, len, NULL, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "dump does not load back: %s\n--- dump:\n%s", err, text);
                FUZZ_ASSERT(r == 0);
        }
        char *text2 = dump_text(&again, &len2);
        FUZZ_ASSERT(len == len2 && memcmp(text, text2, len) == 0);
        free(text2);
        free(text);
        config_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct config cfg;
        char err[512];
        char *yaml = fuzz_copy(data, size);
        env_load(yaml, size);
        memset(err, 'X', sizeof(err));
        int r = config_load_buffer(&cfg, "fuzz.yaml", yaml, size, fake_getenv, err, sizeof(err));
        if (r == 0) {
                check_round_trip(&cfg);
                config_free(&cfg);
        } else {
                FUZZ_ASSERT(memchr(err, '\0', sizeof(err)) && err[0]);
                config_free(&cfg); /* documented as harmless after an error */
        }
        env_clear();
        free(yaml);
        return 0;
}

/* The logger's stand-in: messages are formatted (so ASan and UBSan see the
 * arguments) and dropped, so warnings about deprecated keys do not flood
 * the fuzzer's output. src/base/log.c is not linked into this target. */
void log_emit(enum log_level lvl, const char *trace_id, const char *event, const char *fmt, ...)
{
        char line[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
}

const char *log_q(const char *value)
{
        static char buf[512];
        snprintf(buf, sizeof(buf), "\"%s\"", value ? value : "");
        return buf;
}
