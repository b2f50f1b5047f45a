/* libFuzzer target for the DNS relay's message checks (src/net/dnsmsg.c):
 * any bytes a run sends to its gateway's port 53. The verdict must agree
 * with the header; a passed query's question must end inside the input;
 * an error answer must fit in the query's size, keep its ID and carry
 * QR, the verdict's rcode and nothing but the question. */
#include "fuzz.h"
#include "net/dnsmsg.h"

static void check_answer(const uint8_t *q, size_t size, size_t qend, enum dns_msg_verdict v)
{
        uint8_t *out = malloc(size ? size : 1);
        FUZZ_ASSERT(out);
        size_t n = dns_msg_error(q, size, qend, v, out);
        if (size < DNS_MSG_HEADER) {
                FUZZ_ASSERT(n == 0);
                free(out);
                return;
        }
        FUZZ_ASSERT(n >= DNS_MSG_HEADER && n <= size && n == qend);
        FUZZ_ASSERT(out[0] == q[0] && out[1] == q[1]);
        FUZZ_ASSERT(out[2] & 0x80);
        FUZZ_ASSERT((out[3] & 0x0f) == dns_msg_rcode(v));
        FUZZ_ASSERT(out[4] == 0 && out[5] == (n > DNS_MSG_HEADER ? 1 : 0));
        FUZZ_ASSERT(!out[6] && !out[7] && !out[8] && !out[9] && !out[10] && !out[11]);
        FUZZ_ASSERT(memcmp(out + DNS_MSG_HEADER, q + DNS_MSG_HEADER, n - DNS_MSG_HEADER) == 0);
        /* in place, as the relay does it over UDP */
        uint8_t *same = (uint8_t *)fuzz_copy(q, size);
        FUZZ_ASSERT(dns_msg_error(same, size, qend, v, same) == n);
        FUZZ_ASSERT(memcmp(same, out, n) == 0);
        free(same);
        free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *q = (uint8_t *)fuzz_copy(data, size);
        size_t qend = 0;
        enum dns_msg_verdict v = dns_msg_judge(q, size, &qend);
        FUZZ_ASSERT(qend <= size);
        if (size < DNS_MSG_HEADER || (q[2] & 0x80))
                FUZZ_ASSERT(v == DNS_MSG_DROP);
        else if (q[2] & 0x78)
                FUZZ_ASSERT(v == DNS_MSG_NOTIMP);
        if (v == DNS_MSG_PASS) {
                /* one question, of at least a root name, QTYPE and QCLASS */
                FUZZ_ASSERT(q[4] == 0 && q[5] == 1 && qend >= DNS_MSG_HEADER + 5);
                unsigned qtype = (unsigned)q[qend - 4] << 8 | q[qend - 3];
                FUZZ_ASSERT(qtype != 251 && qtype != 252);
        }
        check_answer(q, size, qend, v);
        free(q);
        return 0;
}
