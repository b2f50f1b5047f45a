/* The shell blob (see shell_proto.h): tagged records, and the status names. */
#include "ipc/shell_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/channel.h"

static const char *const status_names[] = {
    [SHELL_CREATED] = "created", [SHELL_STARTING] = "starting",     [SHELL_RUNNING] = "running",
    [SHELL_EXITED] = "exited",   [SHELL_TERMINATED] = "terminated", [SHELL_FAILED] = "failed",
    [SHELL_LOST] = "lost",
};

const char *shell_status_name(uint32_t status)
{
        return status < sizeof(status_names) / sizeof(status_names[0]) ? status_names[status]
                                                                       : "lost";
}

int shell_status_parse(const char *name)
{
        for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
                if (strcmp(name, status_names[i]) == 0)
                        return (int)i;
        return -1;
}

static void put32(char *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (char)(v >> (8 * i));
}

static uint32_t get32(const char *p)
{
        uint32_t v = 0;
        for (int i = 0; i < 4; i++)
                v |= (uint32_t)(unsigned char)p[i] << (8 * i);
        return v;
}

int shell_blob_add(char **buf, size_t *len, uint32_t tag, const void *data, size_t n)
{
        if (n > SHELL_BLOB_MAX || *len + 8 + n > SHELL_BLOB_MAX)
                return -E2BIG;
        char *p = realloc(*buf, *len + 8 + n);
        if (!p)
                return -ENOMEM;
        put32(p + *len, tag);
        put32(p + *len + 4, (uint32_t)n);
        if (n)
                memcpy(p + *len + 8, data, n);
        *buf = p;
        *len += 8 + n;
        return 0;
}

int shell_blob_next(const char *buf, size_t len, size_t *pos, struct shell_blob_item *ret)
{
        if (*pos >= len)
                return 0;
        if (len - *pos < 8)
                return -EBADMSG;
        uint32_t tag = get32(buf + *pos), n = get32(buf + *pos + 4);
        if (tag < SHELL_BLOB_SCRIPT || tag > SHELL_BLOB_EXCLUDE || n > len - *pos - 8)
                return -EBADMSG;
        *ret = (struct shell_blob_item){.tag = tag, .data = buf + *pos + 8, .len = n};
        *pos += 8 + n;
        return 1;
}

void shell_reply_send(int chan, struct shell_reply *rep, int fd)
{
        rep->hdr = (struct proto_header){.magic = PROTO_MAGIC, .type = PROTO_SHELL_REPLY};
        if (rep->http_status == 0)
                rep->http_status = 200;
        channel_send(chan, rep, sizeof(*rep), &fd, fd >= 0 ? 1 : 0);
}

void shell_reply_verror(int chan, unsigned status, const char *code, const char *fmt, va_list ap)
{
        struct shell_reply rep = {.http_status = status};
        snprintf(rep.code, sizeof(rep.code), "%s", code);
        vsnprintf(rep.message, sizeof(rep.message), fmt, ap);
        shell_reply_send(chan, &rep, -1);
}
