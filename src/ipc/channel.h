/* Sending and receiving fixed-size protocol messages with attached fds
 * over AF_UNIX SOCK_SEQPACKET sockets. Received fds are close-on-exec. */
#pragma once

#include <stddef.h>

/* Send exactly len bytes as one message, with n_fds fds attached. */
int channel_send(int sock, const void *msg, size_t len, const int *fds, size_t n_fds);
/* Receive one message of exactly len bytes (else -EPROTO, fds closed);
 * 0 on EOF; 1 on success with *ret_n_fds fds stored in fds. */
int channel_recv(int sock, void *msg, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds);
