#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
// hiredis 0.14.1: Volley uses its reply reader (RESP2) only; sockets and TLS are Volley's own (RedisSocket).
#include <hiredis/hiredis.h>
#endif
