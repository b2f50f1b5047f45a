/* Leaf parsers for the value syntaxes operators type into config files and
 * environment variables: integers, booleans, byte sizes and Go-style
 * durations, plus the inverse formatters used by config dumps. Each parser
 * takes the whole string (no surrounding blanks, no trailing junk). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal with an optional sign. -EINVAL if not an integer, -ERANGE if it
 * does not fit in int64_t. */
int parse_int64(const char *s, int64_t *ret);
/* parse_int64, then -ERANGE unless min <= value <= max. */
int parse_int64_range(const char *s, int64_t min, int64_t max, int64_t *ret);
int parse_int_range(const char *s, int min, int max, int *ret);

/* true/false, yes/no, on/off, 1/0, t/f, any case. -EINVAL otherwise. */
int parse_bool(const char *s, bool *ret);

/* Bytes: "4096", or a number with K, M, G or T (binary multiples, 1K =
 * 1024) optionally followed by "i", "iB" or "B", any case: "16M", "1GiB",
 * "64kb". No sign, no fraction. -EINVAL if malformed, -ERANGE on overflow. */
int parse_size(const char *s, int64_t *ret);

/* Seconds from a Go-style duration: "30m", "1h30m", "1.5h", "45s",
 * "500ms" (units h, m, s, ms, us, ns), or a bare integer meaning seconds.
 * "" and "0" are 0. Sub-second remainders round up, so a non-zero duration
 * never becomes 0. -EINVAL if malformed, -ERANGE past about 292 years. */
int parse_duration(const char *s, int64_t *ret_seconds);

/* "16M" when bytes is an exact multiple of a binary unit, else "4097".
 * Output is truncated to len like snprintf; returns 0 or -ENOBUFS. */
int parse_format_size(int64_t bytes, char *buf, size_t len);
/* "1h30m", "45s", "2h"; 0 gives "0". Returns 0 or -ENOBUFS. */
int parse_format_duration(int64_t seconds, char *buf, size_t len);

/* "ADDRESS:PORT" with an IPv4 address or a bracketed IPv6 one
 * ("[::1]:9090"), port 1-65535: the address (brackets removed, checked with
 * inet_pton) into addr, the port into *ret_port. -EINVAL if malformed. */
int parse_host_port(const char *s, char *addr, size_t addrlen, int *ret_port);
