/* Trace ids (see trace.h). Random ids come from getrandom(2). */
#include "base/trace.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static void random_hex(char *out, size_t nhex)
{
        unsigned char raw[16];
        if (getrandom(raw, nhex / 2, 0) != (ssize_t)(nhex / 2))
                memset(raw, 0x5a, sizeof(raw));
        for (size_t i = 0; i < nhex / 2; i++)
                snprintf(out + 2 * i, 3, "%02x", raw[i]);
        out[nhex] = '\0';
}

static bool is_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* Lower-case hex and not all zeros (an invalid id per the spec). */
static bool id_field(const char *s, size_t n)
{
        return is_hex(s, n) && strspn(s, "0") < n;
}

bool trace_parse(const char *tp, char ret_trace_id[TRACE_ID_LEN + 1])
{
        /* version(2) - trace(32) - parent(16) - flags(2) = 55 chars */
        if (!tp || strlen(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-')
                return false;
        if (!is_hex(tp, 2) || strncmp(tp, "ff", 2) == 0 || !id_field(tp + 3, TRACE_ID_LEN) ||
            !id_field(tp + 36, SPAN_ID_LEN) || !is_hex(tp + 53, 2))
                return false;
        /* version 00 is exactly 55 chars; later versions may append fields */
        if (strncmp(tp, "00", 2) == 0 && tp[55] != '\0')
                return false;
        memcpy(ret_trace_id, tp + 3, TRACE_ID_LEN);
        ret_trace_id[TRACE_ID_LEN] = '\0';
        return true;
}

void trace_from_header(const char *traceparent, struct trace *ret)
{
        if (!trace_parse(traceparent, ret->trace_id))
                random_hex(ret->trace_id, TRACE_ID_LEN);
        random_hex(ret->span_id, SPAN_ID_LEN);
}

void trace_format(const struct trace *t, char *buf, unsigned long size)
{
        snprintf(buf, size, "00-%s-%s-01", t->trace_id, t->span_id);
}
