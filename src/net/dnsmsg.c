/* DNS message checks for the relay (see dnsmsg.h). RFC 1035 section 4.1:
 * a 12-byte header, then the question: a name as length-prefixed labels
 * (1..63 bytes each, 255 bytes in all with the final zero), QTYPE, QCLASS.
 * A query's only question has no earlier name to point at, so a
 * compression pointer there is malformed. */
#include <string.h>

#include "net/dnsmsg.h"

#define FLAG_QR 0x80     /* in byte 2 */
#define OPCODE_MASK 0x78 /* in byte 2 */
#define FLAG_RD 0x01     /* in byte 2 */
#define NAME_MAX_WIRE 255
#define LABEL_MAX 63
#define QTYPE_IXFR 251
#define QTYPE_AXFR 252

static unsigned get16(const uint8_t *p)
{
        return (unsigned)p[0] << 8 | p[1];
}

/* The end of the question that starts at 12 (name, QTYPE, QCLASS), or 0
 * when it is malformed or cut short. */
static size_t question_end(const uint8_t *msg, size_t len)
{
        size_t pos = DNS_MSG_HEADER;
        for (;;) {
                if (pos >= len)
                        return 0;
                unsigned n = msg[pos++];
                if (n == 0)
                        break;
                /* 0xc0: a pointer; 0x40 and 0x80: extended label types */
                if (n > LABEL_MAX || pos + n > len)
                        return 0;
                pos += n;
                if (pos - DNS_MSG_HEADER + 1 > NAME_MAX_WIRE)
                        return 0;
        }
        return pos + 4 <= len ? pos + 4 : 0;
}

enum dns_msg_verdict dns_msg_judge(const uint8_t *msg, size_t len, size_t *ret_question_end)
{
        *ret_question_end = len < DNS_MSG_HEADER ? len : DNS_MSG_HEADER;
        if (len < DNS_MSG_HEADER || (msg[2] & FLAG_QR))
                return DNS_MSG_DROP;
        if (msg[2] & OPCODE_MASK)
                return DNS_MSG_NOTIMP;
        if (get16(msg + 4) != 1)
                return DNS_MSG_REFUSED;
        if (get16(msg + 6) != 0 || get16(msg + 8) != 0)
                return DNS_MSG_FORMERR;
        size_t end = question_end(msg, len);
        if (end == 0)
                return DNS_MSG_FORMERR;
        *ret_question_end = end;
        unsigned qtype = get16(msg + end - 4);
        if (qtype == QTYPE_AXFR || qtype == QTYPE_IXFR)
                return DNS_MSG_REFUSED;
        return DNS_MSG_PASS;
}

unsigned dns_msg_rcode(enum dns_msg_verdict verdict)
{
        switch (verdict) {
        case DNS_MSG_FORMERR:
                return 1;
        case DNS_MSG_NOTIMP:
                return 4;
        default:
                return 5;
        }
}

size_t dns_msg_error(const uint8_t *msg, size_t len, size_t question_end,
                     enum dns_msg_verdict verdict, uint8_t *out)
{
        if (len < DNS_MSG_HEADER)
                return 0;
        if (question_end < DNS_MSG_HEADER || question_end > len)
                question_end = DNS_MSG_HEADER;
        size_t qlen = question_end - DNS_MSG_HEADER;
        uint8_t hdr[DNS_MSG_HEADER] = {
            msg[0],
            msg[1],
            (uint8_t)(FLAG_QR | (msg[2] & (OPCODE_MASK | FLAG_RD))),
            (uint8_t)dns_msg_rcode(verdict),
            0,
            qlen ? 1 : 0,
        };
        memmove(out + DNS_MSG_HEADER, msg + DNS_MSG_HEADER, qlen);
        memcpy(out, hdr, sizeof(hdr));
        return DNS_MSG_HEADER + qlen;
}
