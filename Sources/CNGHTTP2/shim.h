#ifndef CNGHTTP2_SHIM_H
#define CNGHTTP2_SHIM_H
// nghttp2 1.52 (Debian bookworm): the ssize_t API (mem_send/mem_recv, nghttp2_data_provider).
#include <sys/types.h>
#include <nghttp2/nghttp2.h>
#endif
