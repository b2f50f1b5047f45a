/* request_decode_run / request_decode_language: content-type dispatch, the
 * JSON and form decoders, every field rule with its exact message, and the
 * out-parameter contract. Bodies are passed as exact-size heap copies with
 * no NUL after them, so an over-read shows under ASan or valgrind. */
#include <errno.h>
#include <stdlib.h>

#include "base/utf8.h"
#include "http/request.h"
#include "test.h"

#define CT_JSON "application/json"
#define CT_FORM "application/x-www-form-urlencoded"

static char err[256];

static int decode_n(const char *ct, const char *body, size_t len, struct run_request *ret)
{
        char *copy = malloc(len ? len : 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, body, len);
        memset(err, 'X', sizeof(err));
        int r = request_decode_run(ct, copy, len, ret, err, sizeof(err));
        free(copy);
        return r;
}

static int decode(const char *ct, const char *body, struct run_request *ret)
{
        return decode_n(ct, body, strlen(body), ret);
}

/* The message of a failing decode, or "(accepted)". */
static const char *reject_n(const char *ct, const char *body, size_t len)
{
        struct run_request req = {0};
        int r = decode_n(ct, body, len, &req);
        if (r == 0) {
                run_request_clear(&req);
                return "(accepted)";
        }
        if (r != -EINVAL)
                return "(not -EINVAL)";
        return err;
}

static const char *reject(const char *ct, const char *body)
{
        return reject_n(ct, body, strlen(body));
}

static const char *language_of(const char *ct, const char *body, const char *query)
{
        static char lang[64];
        char *l = NULL;
        char *copy = malloc(strlen(body) + 1);
        if (!copy)
                return "(oom)";
        memcpy(copy, body, strlen(body));
        int r = request_decode_language(ct, copy, strlen(body), query, &l, err, sizeof(err));
        free(copy);
        if (r < 0)
                return r == -EINVAL ? err : "(not -EINVAL)";
        snprintf(lang, sizeof(lang), "=%s", l);
        free(l);
        return lang;
}

TEST(request_json_all_fields)
{
        struct run_request req = {0};
        EXPECT_INT_EQ(decode(CT_JSON,
                             "{\"language\":\"python3\",\"code\":\"print(1)\","
                             "\"preload\":\"import os\",\"enable_network\":true}",
                             &req),
                      0);
        EXPECT_STR_EQ(req.language, "python3");
        EXPECT_STR_EQ(req.code, "print(1)");
        EXPECT_INT_EQ(req.code_len, 8);
        EXPECT_STR_EQ(req.preload, "import os");
        EXPECT_INT_EQ(req.preload_len, 9);
        EXPECT_TRUE(req.enable_network);
        EXPECT_STR_EQ(err, "");
        run_request_clear(&req);
        EXPECT_TRUE(req.code == NULL && req.language == NULL && req.preload == NULL);
}

TEST(request_json_optional_fields_default)
{
        struct run_request req = {0};
        EXPECT_INT_EQ(decode(NULL, "{\"language\":\"nodejs\",\"code\":\"x\"}", &req), 0);
        EXPECT_TRUE(req.preload != NULL);
        EXPECT_STR_EQ(req.preload, "");
        EXPECT_INT_EQ(req.preload_len, 0);
        EXPECT_TRUE(!req.enable_network);
        run_request_clear(&req);

        EXPECT_INT_EQ(decode(CT_JSON,
                             "{\"language\":\"nodejs\",\"code\":\"x\",\"preload\":null,"
                             "\"enable_network\":null}",
                             &req),
                      0);
        EXPECT_STR_EQ(req.preload, "");
        EXPECT_TRUE(!req.enable_network);
        run_request_clear(&req);

        EXPECT_INT_EQ(decode(CT_JSON,
                             "{\"language\":\"nodejs\",\"code\":\"x\",\"enable_network\":false}",
                             &req),
                      0);
        EXPECT_TRUE(!req.enable_network);
        run_request_clear(&req);
}

TEST(request_json_unicode_and_unknown_fields)
{
        struct run_request req = {0};
        EXPECT_INT_EQ(decode(CT_JSON,
                             "{\"extra\":[1,{\"a\":2}],\"language\":\"python3\","
                             "\"code\":\"print('\\u00e9\xe2\x82\xac\\ud83d\\ude00')\"}",
                             &req),
                      0);
        EXPECT_STR_EQ(req.code, "print('\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80')");
        EXPECT_INT_EQ(req.code_len, strlen(req.code));
        run_request_clear(&req);
}

TEST(request_content_type_variants_are_json)
{
        static const char *const types[] = {
            NULL,
            "",
            CT_JSON,
            "application/json; charset=utf-8",
            " Application/JSON ;charset=UTF-8",
            "APPLICATION/JSON",
            "text/plain",
            "application/octet-stream",
            "*"
            "/"
            "*",
            "garbage;;;",
        };
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                EXPECT_STR_EQ(reject(types[i], "{\"language\":\"python3\",\"code\":\"1\"}"),
                              "(accepted)");
        /* and such a type never makes a form of it */
        EXPECT_STR_CONTAINS(reject("text/plain", "language=python3&code=1"),
                            "invalid JSON at line 1");
}

TEST(request_curl_form_type_with_json_body)
{
        struct run_request req = {0};
        EXPECT_INT_EQ(decode(CT_FORM, "{\"language\":\"python3\",\"code\":\"a+b%20\"}", &req), 0);
        EXPECT_STR_EQ(req.code, "a+b%20"); /* JSON: no form decoding */
        run_request_clear(&req);
        EXPECT_INT_EQ(decode(CT_FORM "; charset=utf-8",
                             " \r\n\t{\"language\":\"python3\",\"code\":\"x\"}", &req),
                      0);
        run_request_clear(&req);
        /* taken as JSON, so JSON errors are reported */
        EXPECT_STR_CONTAINS(reject(CT_FORM, "{\"language\":"), "invalid JSON at line 1, column");
}

TEST(request_multipart_refused)
{
        const char *want = "unsupported content type 'multipart/form-data': send application/json";
        EXPECT_STR_EQ(reject("multipart/form-data; boundary=xyz", "--xyz\r\n"), want);
        EXPECT_STR_EQ(reject(" Multipart/Form-Data", "{\"language\":\"python3\",\"code\":\"x\"}"),
                      want);
}

TEST(request_empty_body)
{
        EXPECT_STR_EQ(reject(CT_JSON, ""), "request body is empty");
        EXPECT_STR_EQ(reject(CT_FORM, ""), "request body is empty");
        EXPECT_STR_EQ(reject(NULL, " \r\n\t "), "request body is empty");
        struct run_request req = {0};
        EXPECT_INT_EQ(request_decode_run(CT_JSON, NULL, 0, &req, err, sizeof(err)), -EINVAL);
        EXPECT_STR_EQ(err, "request body is empty");
}

TEST(request_json_missing_and_empty_fields)
{
        EXPECT_STR_EQ(reject(CT_JSON, "{}"), "language: required");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"code\":\"x\"}"), "language: required");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":null,\"code\":\"x\"}"), "language: required");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"\",\"code\":\"x\"}"),
                      "language: must be a non-empty string");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\"}"), "code: required");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":null}"),
                      "code: required");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"\"}"),
                      "code: must be a non-empty string");
        /* keys are case-sensitive */
        EXPECT_STR_EQ(reject(CT_JSON, "{\"Language\":\"python3\",\"code\":\"x\"}"),
                      "language: required");
}

TEST(request_json_mistyped_fields)
{
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":3,\"code\":\"x\"}"),
                      "language: must be a string");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":[\"python3\"],\"code\":\"x\"}"),
                      "language: must be a string");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":true}"),
                      "code: must be a string");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":{}}"),
                      "code: must be a string");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"preload\":5}"),
                      "preload: must be a string");
        EXPECT_STR_EQ(
            reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"preload\":false}"),
            "preload: must be a string");
        EXPECT_STR_EQ(
            reject(CT_JSON,
                   "{\"language\":\"python3\",\"code\":\"x\",\"enable_network\":\"true\"}"),
            "enable_network: must be a boolean");
        EXPECT_STR_EQ(
            reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"enable_network\":1}"),
            "enable_network: must be a boolean");
        EXPECT_STR_EQ(
            reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"enable_network\":[]}"),
            "enable_network: must be a boolean");
}

TEST(request_json_nul_escape)
{
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"print(1)\\u0000\"}"),
                      "code: contains a NUL byte");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"py\\u0000\",\"code\":\"x\"}"),
                      "language: contains a NUL byte");
        EXPECT_STR_EQ(
            reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"preload\":\"\\u0000\"}"),
            "preload: contains a NUL byte");
        /* a raw NUL byte is not JSON at all */
        EXPECT_STR_CONTAINS(reject_n(CT_JSON, "{\"language\":\"python3\",\"code\":\"a\0\"}", 33),
                            "invalid JSON at line 1, column 31: ");
}

TEST(request_json_syntax_errors)
{
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\"} x"),
                      "invalid JSON at line 1, column 35: end of file expected near 'x'");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\"}{}"),
                      "invalid JSON at line 1, column 34: end of file expected near '{'");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"pri"),
                      "invalid JSON at line 1, column 33: premature end of input near '\"pri'");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\""),
                      "invalid JSON at line 1, column 21: '}' expected near end of file");
        EXPECT_STR_EQ(reject(CT_JSON, "{\n  \"language\": \"python3\",\n  \"code\": 'x'\n}"),
                      "invalid JSON at line 3, column 11: invalid token near '''");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"\xff\"}"),
                      "invalid JSON at line 1, column 13: unable to decode byte 0xff near '\"'");
        EXPECT_STR_CONTAINS(reject(CT_JSON, "{\"code\":\"x\",}"),
                            "invalid JSON at line 1, column 13: ");
        /* jansson quotes a lone lead byte of "\xe7\x9b\x9a"; err stays valid UTF-8 */
        EXPECT_STR_EQ(reject(CT_JSON, "\"\\\xe7\x9b\x9a"),
                      "invalid JSON at line 1, column 3: invalid escape near '\"\\\xef\xbf\xbd'");
}

TEST(request_json_huge_numbers)
{
        EXPECT_STR_CONTAINS(
            reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"n\":1e999}"),
            "real number overflow");
        EXPECT_STR_CONTAINS(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\","
                                            "\"n\":123456789012345678901234567890}"),
                            "too big integer");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"n\":1e300,"
                                      "\"m\":-9223372036854775808}"),
                      "(accepted)");
        EXPECT_STR_EQ(reject(CT_JSON, "{\"language\":\"python3\",\"code\":9223372036854775807}"),
                      "code: must be a string");
}

TEST(request_json_not_an_object)
{
        static const char *const bodies[] = {
            "[]", "[{\"language\":\"python3\"}]", "\"python3\"", "42", "null", "true", " 1.5 "};
        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
                EXPECT_STR_EQ(reject(CT_JSON, bodies[i]), "request body must be a JSON object");
}

TEST(request_json_deep_nesting_is_an_error_not_a_crash)
{
        size_t n = 100000;
        char *b = malloc(n);
        EXPECT_TRUE(b != NULL);
        memset(b, '[', n);
        const char *m = reject_n(CT_JSON, b, n);
        free(b);
        EXPECT_STR_CONTAINS(m, "invalid JSON at line 1");
        EXPECT_STR_CONTAINS(m, "maximum parsing depth");
}

TEST(request_form_all_fields)
{
        struct run_request req = {0};
        EXPECT_INT_EQ(decode(CT_FORM,
                             "language=python3&code=print%28%22hi+there%22%29%0a%2A%2a"
                             "&preload=import+os&enable_network=true",
                             &req),
                      0);
        EXPECT_STR_EQ(req.language, "python3");
        EXPECT_STR_EQ(req.code, "print(\"hi there\")\n**");
        EXPECT_INT_EQ(req.code_len, 20);
        EXPECT_STR_EQ(req.preload, "import os");
        EXPECT_INT_EQ(req.preload_len, 9);
        EXPECT_TRUE(req.enable_network);
        run_request_clear(&req);
}

TEST(request_form_defaults_and_layout)
{
        struct run_request req = {0};
        EXPECT_INT_EQ(
            decode(CT_FORM "; charset=UTF-8", "&&unknown&x=%zz&language=nodejs&&code=1&", &req), 0);
        EXPECT_STR_EQ(req.language, "nodejs");
        EXPECT_STR_EQ(req.code, "1");
        EXPECT_STR_EQ(req.preload, "");
        EXPECT_TRUE(!req.enable_network);
        run_request_clear(&req);

        /* first occurrence wins; an encoded key still names the field */
        EXPECT_INT_EQ(
            decode(CT_FORM, "%63ode=first&language=python3&code=second&c%6Fde=third", &req), 0);
        EXPECT_STR_EQ(req.code, "first");
        run_request_clear(&req);

        /* '=' inside a value is data; UTF-8 passes through */
        EXPECT_INT_EQ(decode(CT_FORM, "language=python3&code=a=b%3D%C3%A9\xc3\xa9", &req), 0);
        EXPECT_STR_EQ(req.code, "a=b=\xc3\xa9\xc3\xa9");
        run_request_clear(&req);
}

TEST(request_form_missing_and_empty)
{
        EXPECT_STR_EQ(reject(CT_FORM, "code=x"), "language: required");
        EXPECT_STR_EQ(reject(CT_FORM, "language=&code=x"), "language: must be a non-empty string");
        EXPECT_STR_EQ(reject(CT_FORM, "language&code=x"), "language: must be a non-empty string");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3"), "code: required");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code="),
                      "code: must be a non-empty string");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&Code=x"), "code: required");
}

TEST(request_form_bad_escapes)
{
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=%zz"),
                      "invalid form encoding in 'code'");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=abc%4"),
                      "invalid form encoding in 'code'");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=abc%"),
                      "invalid form encoding in 'code'");
        EXPECT_STR_EQ(reject(CT_FORM, "language=py%g3&code=x"),
                      "invalid form encoding in 'language'");
        EXPECT_STR_EQ(reject(CT_FORM, "language=p&code=x&preload=%%"),
                      "invalid form encoding in 'preload'");
        EXPECT_STR_EQ(reject(CT_FORM, "language=p&code=x&enable_network=%"),
                      "invalid form encoding in 'enable_network'");
        /* an escape cut by len must not read the bytes after it */
        EXPECT_STR_EQ(reject_n(CT_FORM, "language=python3&code=%41", 23),
                      "invalid form encoding in 'code'");
        EXPECT_STR_EQ(reject_n(CT_FORM, "language=python3&code=%41", 24),
                      "invalid form encoding in 'code'");
        EXPECT_STR_EQ(reject_n(CT_FORM, "language=python3&code=%41", 25), "(accepted)");
}

TEST(request_form_invalid_utf8_and_nul)
{
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=%ff"), "code: not valid UTF-8");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=\xc3("), "code: not valid UTF-8");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=%ED%A0%80"), "code: not valid UTF-8");
        EXPECT_STR_EQ(reject(CT_FORM, "language=%C3&code=x"), "language: not valid UTF-8");
        EXPECT_STR_EQ(reject(CT_FORM, "language=p&code=x&preload=%C0%AF"),
                      "preload: not valid UTF-8");
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=a%00b"), "code: contains a NUL byte");
        EXPECT_STR_EQ(reject_n(CT_FORM, "language=python3&code=a\0b", 25),
                      "code: contains a NUL byte");
        EXPECT_STR_EQ(reject(CT_FORM, "language=py%00&code=x"), "language: contains a NUL byte");
}

static int form_network(const char *value, bool *ret)
{
        char body[128];
        snprintf(body, sizeof(body), "language=python3&code=x&enable_network=%s", value);
        struct run_request req = {0};
        int r = decode(CT_FORM, body, &req);
        if (r == 0)
                *ret = req.enable_network;
        run_request_clear(&req);
        return r;
}

TEST(request_form_enable_network_words)
{
        static const char *const yes[] = {"true", "1", "t", "yes", "on", "TRUE", "Yes", "On", "T"};
        static const char *const no[] = {"false", "0", "f", "no", "off", "", "FALSE", "Off", "F"};
        bool v;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                v = false;
                EXPECT_INT_EQ(form_network(yes[i], &v), 0);
                EXPECT_TRUE(v);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                v = true;
                EXPECT_INT_EQ(form_network(no[i], &v), 0);
                EXPECT_TRUE(!v);
        }
        static const char *const bad[] = {"2", "maybe", "truex", "tru", "%00", "yes%00", "+"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                EXPECT_INT_EQ(form_network(bad[i], &v), -EINVAL);
                EXPECT_STR_EQ(err, "enable_network: must be a boolean");
        }
        EXPECT_STR_EQ(reject(CT_FORM, "language=python3&code=x&enable_network"), "(accepted)");
}

TEST(request_body_is_not_nul_terminated)
{
        struct run_request req = {0};
        const char *json = "{\"language\":\"python3\",\"code\":\"x\"}GARBAGE";
        EXPECT_INT_EQ(decode_n(CT_JSON, json, strlen(json) - 7, &req), 0);
        EXPECT_STR_EQ(req.code, "x");
        run_request_clear(&req);
        const char *form = "language=python3&code=xyz";
        EXPECT_INT_EQ(decode_n(CT_FORM, form, strlen(form) - 1, &req), 0);
        EXPECT_STR_EQ(req.code, "xy");
        EXPECT_INT_EQ(req.code_len, 2);
        run_request_clear(&req);
}

TEST(request_ret_untouched_on_failure)
{
        char sentinel;
        struct run_request req = {.language = &sentinel,
                                  .code = &sentinel,
                                  .code_len = 7,
                                  .preload = &sentinel,
                                  .preload_len = 9,
                                  .enable_network = true};
        EXPECT_INT_EQ(
            decode(CT_JSON, "{\"language\":\"python3\",\"code\":\"x\",\"preload\":1}", &req),
            -EINVAL);
        EXPECT_TRUE(req.language == &sentinel && req.code == &sentinel && req.preload == &sentinel);
        EXPECT_INT_EQ(req.code_len, 7);
        EXPECT_INT_EQ(req.preload_len, 9);
        EXPECT_TRUE(req.enable_network);
        run_request_clear(NULL); /* accepted */
}

TEST(request_err_buffer_truncation)
{
        struct run_request req = {0};
        const char *body = "{\"language\":\"python3\"}";
        char small[8];
        EXPECT_INT_EQ(request_decode_run(CT_JSON, body, strlen(body), &req, small, sizeof(small)),
                      -EINVAL);
        EXPECT_STR_EQ(small, "code: r");
        EXPECT_INT_EQ(request_decode_run(CT_JSON, body, strlen(body), &req, NULL, 0), -EINVAL);
        char one[1] = {'X'};
        EXPECT_INT_EQ(request_decode_run(CT_JSON, body, strlen(body), &req, one, sizeof(one)),
                      -EINVAL);
        EXPECT_INT_EQ(one[0], '\0');
}

TEST(request_err_truncation_keeps_utf8_whole)
{
        /* jansson quotes the token, so the message holds a two-byte char */
        const char *body = "{\"\xc3\xa9\xc3\xa9\xff";
        struct run_request req = {0};
        char full[256];
        EXPECT_INT_EQ(request_decode_run(CT_JSON, body, strlen(body), &req, full, sizeof(full)),
                      -EINVAL);
        const char *second = strstr(full, "\xc3\xa9\xc3\xa9");
        EXPECT_TRUE(second != NULL);
        size_t cut = (size_t)(second - full) + 2; /* just after the first e-acute */
        char part[256];
        /* room for cut + 1 bytes: the first byte of the second char fits */
        EXPECT_INT_EQ(request_decode_run(CT_JSON, body, strlen(body), &req, part, cut + 2),
                      -EINVAL);
        EXPECT_INT_EQ(strlen(part), cut);
        EXPECT_TRUE(utf8_valid(part, strlen(part)));
        EXPECT_TRUE(strncmp(part, full, cut) == 0);
}

TEST(request_language_from_query)
{
        EXPECT_STR_EQ(language_of(NULL, "", "python3"), "=python3");
        /* the query wins over the body */
        EXPECT_STR_EQ(language_of(CT_JSON, "{\"language\":\"nodejs\"}", "python3"), "=python3");
        EXPECT_STR_EQ(language_of(NULL, "", ""), "language: must be a non-empty string");
        EXPECT_STR_EQ(language_of(NULL, "", "py\xff"), "language: not valid UTF-8");
        EXPECT_STR_EQ(language_of(NULL, "not json", "nodejs"), "=nodejs");
}

TEST(request_language_from_body)
{
        EXPECT_STR_EQ(language_of(CT_JSON, "{\"language\":\"nodejs\"}", NULL), "=nodejs");
        EXPECT_STR_EQ(language_of("application/json; charset=utf-8",
                                  "{\"language\":\"python3\",\"x\":1}", NULL),
                      "=python3");
        EXPECT_STR_EQ(language_of(CT_FORM, "language=python3", NULL), "=python3");
        EXPECT_STR_EQ(language_of(CT_FORM, "{\"language\":\"python3\"}", NULL), "=python3");
        EXPECT_STR_EQ(language_of(NULL, "", NULL), "language: required");
        EXPECT_STR_EQ(language_of(CT_JSON, "  ", NULL), "language: required");
        EXPECT_STR_EQ(language_of(CT_JSON, "{}", NULL), "language: required");
        EXPECT_STR_EQ(language_of(CT_JSON, "{\"language\":7}", NULL), "language: must be a string");
        EXPECT_STR_EQ(language_of(CT_JSON, "{\"language\":\"\"}", NULL),
                      "language: must be a non-empty string");
        EXPECT_STR_EQ(language_of(CT_JSON, "[\"python3\"]", NULL),
                      "request body must be a JSON object");
        EXPECT_STR_EQ(language_of(CT_JSON, "{\"language\":", NULL),
                      "invalid JSON at line 1, column 12: unexpected token near end of file");
        EXPECT_STR_EQ(language_of(CT_FORM, "language=%ff", NULL), "language: not valid UTF-8");
        EXPECT_STR_EQ(language_of("multipart/form-data", "x", NULL),
                      "unsupported content type 'multipart/form-data': send application/json");
}

TEST(request_language_ret_untouched_on_failure)
{
        char sentinel;
        char *l = &sentinel;
        EXPECT_INT_EQ(request_decode_language(CT_JSON, "{}", 2, NULL, &l, err, sizeof(err)),
                      -EINVAL);
        EXPECT_TRUE(l == &sentinel);
}
