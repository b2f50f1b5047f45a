/* The program file of `lockbox run`: its language (from --language or the
 * extension) and its text, read whole and checked before anything is sent
 * (size cap, non-empty, UTF-8 without NUL, as the daemon requires). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/utf8.h"
#include "base/util.h"
#include "cli/cli.h"

static const struct {
        const char *suffix;
        const char *language;
} extensions[] = {
    {".py", "python3"},
    {".js", "nodejs"},
    {".cjs", "nodejs"}, /* Node runs programs as CommonJS; .mjs is not offered */
};

static const char *const languages[] = {"python3", "nodejs"};

static bool has_suffix(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);
        return n > m && strcmp(s + n - m, suffix) == 0;
}

static int language_check(const char *name, const char **ret, char *err, size_t errlen)
{
        for (size_t i = 0; i < ELEMENTSOF(languages); i++)
                if (strcmp(name, languages[i]) == 0) {
                        *ret = languages[i];
                        return 0;
                }
        snprintf(err, errlen, "unknown language '%s': use python3 or nodejs", name);
        return -EINVAL;
}

int cli_source_language(const char *path, const char *override, const char **ret, char *err,
                        size_t errlen)
{
        if (override)
                return language_check(override, ret, err, errlen);
        for (size_t i = 0; i < ELEMENTSOF(extensions); i++)
                if (has_suffix(path, extensions[i].suffix)) {
                        *ret = extensions[i].language;
                        return 0;
                }
        if (strcmp(path, "-") == 0) {
                snprintf(err, errlen, "standard input: give --language python3|nodejs");
                return -EINVAL;
        }
        snprintf(err, errlen,
                 "%s: cannot tell the language from the name (.py, .js or .cjs); "
                 "give --language python3|nodejs",
                 path);
        return -EINVAL;
}

static int file_open(const char *path)
{
        if (strcmp(path, "-") == 0)
                return fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
        return open(path, O_RDONLY | O_CLOEXEC);
}

static int source_read(const char *path, struct strbuf *sb, char *err, size_t errlen)
{
        _cleanup_close_ int fd = file_open(path);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                int e = errno;
                snprintf(err, errlen, "%s: %s", path, strerror(e));
                return -e;
        }
        if (S_ISDIR(st.st_mode)) {
                snprintf(err, errlen, "%s: %s", path, strerror(EISDIR));
                return -EISDIR;
        }
        /* Regular files are refused by size before reading; pipes hit the
         * buffer's cap. */
        int r = -E2BIG;
        if (!S_ISREG(st.st_mode) || st.st_size <= (off_t)CLI_SOURCE_MAX)
                r = file_read_fd(fd, sb); /* sb's limit: CLI_SOURCE_MAX */
        if (r == -E2BIG)
                snprintf(err, errlen, "%s: larger than 16 MiB, the most lockbox sends", path);
        else if (r < 0)
                snprintf(err, errlen, "%s: %s", path, strerror(-r));
        return r;
}

/* The daemon refuses empty code, NUL bytes and invalid UTF-8; say so here,
 * with the offset, rather than relay a server error. */
static int text_check(const char *path, const struct strbuf *sb, char *err, size_t errlen)
{
        if (sb->len == 0) {
                snprintf(err, errlen, "%s: the file is empty", path);
                return -ENODATA;
        }
        const char *nul = memchr(sb->data, '\0', sb->len);
        if (nul) {
                snprintf(err, errlen, "%s: NUL byte at offset %zu", path, (size_t)(nul - sb->data));
                return -EILSEQ;
        }
        size_t valid = utf8_valid_prefix(sb->data, sb->len);
        if (valid != sb->len) {
                snprintf(err, errlen, "%s: not valid UTF-8 at offset %zu", path, valid);
                return -EILSEQ;
        }
        return 0;
}

int cli_source_load(const char *path, const char *override, struct cli_source *ret, char *err,
                    size_t errlen)
{
        const char *language;
        int r = cli_source_language(path, override, &language, err, errlen);
        if (r < 0)
                return r;
        struct strbuf sb;
        strbuf_init(&sb, CLI_SOURCE_MAX);
        r = source_read(path, &sb, err, errlen);
        if (r == 0)
                r = text_check(path, &sb, err, errlen);
        if (r < 0) {
                strbuf_free(&sb);
                return r;
        }
        *ret = (struct cli_source){.language = language, .code = sb};
        return 0;
}

void cli_source_free(struct cli_source *src)
{
        strbuf_free(&src->code);
}
