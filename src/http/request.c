/* Request body decoding (see request.h): the Content-Type picks JSON or an
 * urlencoded form, then each run field is validated with one message that
 * names it. Bodies are untrusted and not NUL-terminated (len is
 * authoritative); this file is a fuzz target, so every path is bounded and
 * frees what it took. */
#include "http/request.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/utf8.h"
#include "base/util.h"

/* Where a decoder writes its one-line reason. */
struct errmsg {
        char *buf;
        size_t size;
};

enum body_kind {
        BODY_JSON,
        BODY_FORM,
};

/* An opened body: the parsed top-level object, or the raw form bytes. */
struct body {
        enum body_kind kind;
        json_t *json;
        const char *form;
        size_t form_len;
};

/* Spellings of enable_network accepted in a form (compared ignoring case);
 * the empty value is false, like an unchecked box. */
static const struct {
        const char *word;
        bool value;
} form_booleans[] = {
    {"true", true}, {"1", true},  {"t", true},   {"yes", true},  {"on", true}, {"false", false},
    {"0", false},   {"f", false}, {"no", false}, {"off", false}, {"", false},
};

/* Format the reason into e and return -EINVAL. A message cut by the buffer
 * size is cut back to whole UTF-8 characters, so it stays valid JSON text. */
_printf_(2, 3) static int errmsg_set(const struct errmsg *e, const char *fmt, ...)
{
        if (!e->buf || e->size == 0)
                return -EINVAL;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(e->buf, e->size, fmt, ap);
        va_end(ap);
        if (n < 0)
                e->buf[0] = '\0';
        else if ((size_t)n >= e->size)
                e->buf[utf8_valid_prefix(e->buf, strlen(e->buf))] = '\0';
        return -EINVAL;
}

static int errmsg_oom(const struct errmsg *e)
{
        errmsg_set(e, "out of memory");
        return -ENOMEM;
}

static void errmsg_clear(const struct errmsg *e)
{
        if (e->buf && e->size > 0)
                e->buf[0] = '\0';
}

static bool is_blank_char(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool body_is_blank(const char *body, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!is_blank_char(body[i]))
                        return false;
        return true;
}

/* The media type of a Content-Type value: parameters (";charset=...") and
 * surrounding spaces dropped. Points into ct; NULL gives length 0. */
static const char *media_type(const char *ct, size_t *ret_len)
{
        if (!ct) {
                *ret_len = 0;
                return "";
        }
        while (*ct == ' ' || *ct == '\t')
                ct++;
        size_t n = strcspn(ct, ";");
        while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
                n--;
        *ret_len = n;
        return ct;
}

static bool media_is(const char *mt, size_t len, const char *name)
{
        return strlen(name) == len && strncasecmp(mt, name, len) == 0;
}

/* The first non-blank byte is '{': the body is a JSON object. */
static bool body_looks_json(const char *body, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!is_blank_char(body[i]))
                        return body[i] == '{';
        return false;
}

static int body_kind_of(const char *content_type, const char *body, size_t len, enum body_kind *ret,
                        const struct errmsg *e)
{
        size_t n;
        const char *mt = media_type(content_type, &n);
        if (media_is(mt, n, "multipart/form-data"))
                return errmsg_set(e, "unsupported content type 'multipart/form-data': "
                                     "send application/json");
        /* `curl -d '{...}'` labels its body application/x-www-form-urlencoded
         * unless -H says otherwise, so a "form" that opens with '{' is taken
         * as JSON: no field lockbox reads could be its first key. Any other
         * or missing type (text/plain, a wildcard, ...) is tried as JSON too. */
        if (media_is(mt, n, "application/x-www-form-urlencoded") && !body_looks_json(body, len))
                *ret = BODY_FORM;
        else
                *ret = BODY_JSON;
        return 0;
}

/* jansson quotes the offending token raw, which may end in the first byte
 * of a UTF-8 sequence (an escape like backslash + e7 9b 9a): repair it so
 * that err is always valid UTF-8. */
static int json_syntax_error(const json_error_t *jerr, const struct errmsg *e)
{
        _cleanup_free_ char *text =
            utf8_sanitize(jerr->text, strnlen(jerr->text, sizeof(jerr->text)), NULL);
        if (!text)
                return errmsg_oom(e);
        return errmsg_set(e, "invalid JSON at line %d, column %d: %s", jerr->line, jerr->column,
                          text);
}

/* Parse a JSON object. JSON_ALLOW_NUL lets a \u0000 through so that the
 * field check names it; JSON_DECODE_ANY lets a bare scalar parse so that it
 * gets our message; trailing bytes after the value stay an error. */
static int body_parse_json(const char *body, size_t len, json_t **ret, const struct errmsg *e)
{
        json_error_t jerr;
        json_t *j = json_loadb(body, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
        if (!j)
                return json_syntax_error(&jerr, e);
        if (!json_is_object(j)) {
                json_decref(j);
                return errmsg_set(e, "request body must be a JSON object");
        }
        *ret = j;
        return 0;
}

/* body must not be blank (callers say why an empty body is wrong). */
static int body_open(const char *content_type, const char *body, size_t len, struct body *ret,
                     const struct errmsg *e)
{
        enum body_kind kind;
        int r = body_kind_of(content_type, body, len, &kind, e);
        if (r < 0)
                return r;
        json_t *j = NULL;
        if (kind == BODY_JSON) {
                r = body_parse_json(body, len, &j, e);
                if (r < 0)
                        return r;
        }
        *ret = (struct body){.kind = kind, .json = j, .form = body, .form_len = len};
        return 0;
}

static void body_close(struct body *b)
{
        json_decref(b->json);
        b->json = NULL;
}

/* Rules shared by JSON and form text fields. */
static int text_check(const char *name, const char *s, size_t len, bool required,
                      const struct errmsg *e)
{
        if (required && len == 0)
                return errmsg_set(e, "%s: must be a non-empty string", name);
        if (memchr(s, '\0', len))
                return errmsg_set(e, "%s: contains a NUL byte", name);
        if (!utf8_valid(s, len))
                return errmsg_set(e, "%s: not valid UTF-8", name);
        return 0;
}

static int text_dup(const char *s, size_t len, char **ret, size_t *ret_len, const struct errmsg *e)
{
        char *d = malloc(len + 1);
        if (!d)
                return errmsg_oom(e);
        memcpy(d, s, len);
        d[len] = '\0';
        *ret = d;
        if (ret_len)
                *ret_len = len;
        return 0;
}

/* Absent and null mean the same: "required", or "" for an optional field. */
static int json_text(json_t *obj, const char *name, bool required, char **ret, size_t *ret_len,
                     const struct errmsg *e)
{
        json_t *v = json_object_get(obj, name);
        if (!v || json_is_null(v)) {
                if (required)
                        return errmsg_set(e, "%s: required", name);
                return text_dup("", 0, ret, ret_len, e);
        }
        if (!json_is_string(v))
                return errmsg_set(e, "%s: must be a string", name);
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        int r = text_check(name, s, len, required, e);
        if (r < 0)
                return r;
        return text_dup(s, len, ret, ret_len, e);
}

static int json_bool(json_t *obj, const char *name, bool *ret, const struct errmsg *e)
{
        json_t *v = json_object_get(obj, name);
        if (v && !json_is_null(v) && !json_is_boolean(v))
                return errmsg_set(e, "%s: must be a boolean", name);
        *ret = v && json_is_true(v);
        return 0;
}

static int hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Decode one form byte at s[*pos]: '+' is a space, %XX an escape. */
static int form_byte(const char *s, size_t len, size_t *pos, char *ret)
{
        size_t i = *pos;
        char c = s[i];
        if (c == '+') {
                c = ' ';
        } else if (c == '%') {
                if (len - i < 3)
                        return -EINVAL;
                int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                c = (char)(hi << 4 | lo);
                i += 2;
        }
        *pos = i + 1;
        *ret = c;
        return 0;
}

/* Does the encoded key decode to name? An undecodable key matches nothing. */
static bool form_key_is(const char *key, size_t len, const char *name)
{
        size_t pos = 0, n = 0, name_len = strlen(name);
        while (pos < len) {
                char c;
                if (form_byte(key, len, &pos, &c) < 0 || n >= name_len || c != name[n])
                        return false;
                n++;
        }
        return n == name_len;
}

static int form_unescape(const char *s, size_t len, char **ret, size_t *ret_len)
{
        _cleanup_free_ char *d = malloc(len + 1);
        if (!d)
                return -ENOMEM;
        size_t pos = 0, n = 0;
        while (pos < len) {
                int r = form_byte(s, len, &pos, &d[n]);
                if (r < 0)
                        return r;
                n++;
        }
        d[n] = '\0';
        *ret_len = n;
        *ret = TAKE_PTR(d);
        return 0;
}

/* The decoded value of the first pair whose key is name ("key" alone has
 * the empty value). Returns 1 and the value, 0 when absent, -EINVAL for a
 * bad escape in the value, -ENOMEM. */
static int form_lookup(const char *form, size_t len, const char *name, char **ret, size_t *ret_len)
{
        size_t pos = 0;
        while (pos < len) {
                const char *seg = form + pos;
                const char *amp = memchr(seg, '&', len - pos);
                size_t seg_len = amp ? (size_t)(amp - seg) : len - pos;
                const char *eq = memchr(seg, '=', seg_len);
                size_t key_len = eq ? (size_t)(eq - seg) : seg_len;
                if (form_key_is(seg, key_len, name)) {
                        size_t skip = eq ? key_len + 1 : key_len;
                        int r = form_unescape(seg + skip, seg_len - skip, ret, ret_len);
                        return r < 0 ? r : 1;
                }
                pos += seg_len + 1;
        }
        return 0;
}

/* form_lookup() with its errors turned into messages: 1 found, 0 absent. */
static int form_get(const struct body *b, const char *name, char **ret, size_t *ret_len,
                    const struct errmsg *e)
{
        int r = form_lookup(b->form, b->form_len, name, ret, ret_len);
        if (r == -EINVAL)
                return errmsg_set(e, "invalid form encoding in '%s'", name);
        if (r < 0)
                return errmsg_oom(e);
        return r;
}

static int form_text(const struct body *b, const char *name, bool required, char **ret,
                     size_t *ret_len, const struct errmsg *e)
{
        _cleanup_free_ char *v = NULL;
        size_t len = 0;
        int r = form_get(b, name, &v, &len, e);
        if (r < 0)
                return r;
        if (r == 0) {
                if (required)
                        return errmsg_set(e, "%s: required", name);
                return text_dup("", 0, ret, ret_len, e);
        }
        r = text_check(name, v, len, required, e);
        if (r < 0)
                return r;
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(v);
        return 0;
}

static int form_bool(const struct body *b, const char *name, bool *ret, const struct errmsg *e)
{
        _cleanup_free_ char *v = NULL;
        size_t len = 0;
        int r = form_get(b, name, &v, &len, e);
        if (r < 0)
                return r;
        if (r == 0) {
                *ret = false;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(form_booleans); i++) {
                const char *w = form_booleans[i].word;
                if (strlen(w) == len && strncasecmp(v, w, len) == 0) {
                        *ret = form_booleans[i].value;
                        return 0;
                }
        }
        return errmsg_set(e, "%s: must be a boolean", name);
}

static int body_text(const struct body *b, const char *name, bool required, char **ret,
                     size_t *ret_len, const struct errmsg *e)
{
        if (b->kind == BODY_JSON)
                return json_text(b->json, name, required, ret, ret_len, e);
        return form_text(b, name, required, ret, ret_len, e);
}

static int body_bool(const struct body *b, const char *name, bool *ret, const struct errmsg *e)
{
        if (b->kind == BODY_JSON)
                return json_bool(b->json, name, ret, e);
        return form_bool(b, name, ret, e);
}

void run_request_clear(struct run_request *r)
{
        if (!r)
                return;
        free(r->language);
        free(r->code);
        free(r->preload);
        *r = (struct run_request){0};
}

static int run_request_fill(const struct body *b, struct run_request *req, const struct errmsg *e)
{
        int r = body_text(b, "language", true, &req->language, NULL, e);
        if (r < 0)
                return r;
        r = body_text(b, "code", true, &req->code, &req->code_len, e);
        if (r < 0)
                return r;
        r = body_text(b, "preload", false, &req->preload, &req->preload_len, e);
        if (r < 0)
                return r;
        return body_bool(b, "enable_network", &req->enable_network, e);
}

int request_decode_run(const char *content_type, const char *body, size_t len,
                       struct run_request *ret, char *err, size_t errlen)
{
        const struct errmsg e = {err, errlen};
        _cleanup_(body_close) struct body b = {0};
        _cleanup_(run_request_clear) struct run_request req = {0};

        if (body_is_blank(body, len))
                return errmsg_set(&e, "request body is empty");
        int r = body_open(content_type, body, len, &b, &e);
        if (r < 0)
                return r;
        r = run_request_fill(&b, &req, &e);
        if (r < 0)
                return r;
        errmsg_clear(&e);
        *ret = req;
        req = (struct run_request){0};
        return 0;
}

/* A query value arrives already percent-decoded and NUL-terminated, so an
 * embedded %00 has cut it short before it reaches us. */
static int language_from_query(const char *q, char **ret, const struct errmsg *e)
{
        int r = text_check("language", q, strlen(q), true, e);
        if (r < 0)
                return r;
        return text_dup(q, strlen(q), ret, NULL, e);
}

int request_decode_language(const char *content_type, const char *body, size_t len,
                            const char *query_language, char **ret_language, char *err,
                            size_t errlen)
{
        const struct errmsg e = {err, errlen};
        _cleanup_(body_close) struct body b = {0};
        _cleanup_free_ char *lang = NULL;
        int r;

        if (query_language)
                r = language_from_query(query_language, &lang, &e);
        else if (body_is_blank(body, len))
                r = errmsg_set(&e, "language: required");
        else if ((r = body_open(content_type, body, len, &b, &e)) >= 0)
                r = body_text(&b, "language", true, &lang, NULL, &e);
        if (r < 0)
                return r;
        errmsg_clear(&e);
        *ret_language = TAKE_PTR(lang);
        return 0;
}
