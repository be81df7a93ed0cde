/* Shared by fuzz_hdr.c and gen_corpus.c: the layout of a fuzz input. */
#ifndef CADRE_FUZZ_COMMON_H
#define CADRE_FUZZ_COMMON_H

#include "p2p/p2p_engine.h"

/* Input byte 0: even = one header through cadre__p2p_hdr_check (byte 1
 * picks the path below), odd = a TCP stream: bit 1 set = it starts with the
 * handshake, bits 2.. pick the chunk size. */
enum { FUZZ_PATH_TCP, FUZZ_PATH_SHM_EAGER, FUZZ_PATH_SHM_BULK, FUZZ_PATH_ENGINE };
#define FUZZ_MODE_CHECK 0
#define FUZZ_MODE_TCP 1
#define FUZZ_MODE_TCP_HELLO 3

#define FUZZ_COOKIE 0x5eed5eedc0ffee11ull
/* The shm limits with the default CADRE_SHM_FRAG (p2p_shm.c: SLOT_DATA). */
#define FUZZ_SHM_SLOT_DATA CADRE_SHM_EAGER
#define FUZZ_SHM_FRAG (128u << 10)

#endif
