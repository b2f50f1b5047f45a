/* What the DNS relay lets through: a standard query (opcode QUERY, QR
 * clear, exactly one well-formed question, no answer or authority records,
 * not a zone transfer). Everything else gets an error answer built here
 * from the bytes already checked, or nothing (a response: answering one
 * could start a loop between two reflectors). Pure functions over a
 * buffer, no allocation; fuzzed by tests/fuzz/fuzz_dns.c. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define DNS_MSG_HEADER 12

enum dns_msg_verdict {
        DNS_MSG_PASS,    /* a standard query: relay it unchanged */
        DNS_MSG_DROP,    /* shorter than a header, or a response (QR set): no answer */
        DNS_MSG_FORMERR, /* a malformed question, or records a query never carries */
        DNS_MSG_NOTIMP,  /* an opcode other than QUERY (UPDATE, NOTIFY, ...) */
        DNS_MSG_REFUSED, /* QDCOUNT other than 1, AXFR or IXFR */
};

/* The verdict on msg[0..len); *ret_question_end: where the question ends
 * (12 when it was not parsed), always <= len. */
enum dns_msg_verdict dns_msg_judge(const uint8_t *msg, size_t len, size_t *ret_question_end);

/* The error answer to msg for verdict (FORMERR, NOTIMP or REFUSED, or
 * REFUSED for a query the relay will not carry, passing ones included):
 * the header with QR set, the query's opcode and RD, the rcode, and the
 * question (msg[12..question_end)) when question_end > 12; written to
 * out (at least question_end bytes), never longer than the query.
 * Returns its length, or 0 when len < 12 (nothing to answer with). */
size_t dns_msg_error(const uint8_t *msg, size_t len, size_t question_end,
                     enum dns_msg_verdict verdict, uint8_t *out);

/* The rcode an error verdict answers with (1, 4 or 5; 5 for any other). */
unsigned dns_msg_rcode(enum dns_msg_verdict verdict);
