#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
// hiredis 0.14.1: no TLS, no RESP3. Use the ...Argv calls (the variadic ones do not import).
#include <hiredis/hiredis.h>
#endif
