/* Placeholder until the TCP transport lands: reports itself unavailable. */
#include "p2p.h"

static int tcp_init(void)
{
    return cadre__error(CADRE_ERR_UNSUPPORTED, "tcp transport not built yet");
}
static int tcp_none(void)
{
    return CADRE_ERR_UNSUPPORTED;
}
static int tcp_reachable(int w)
{
    (void)w;
    return 0;
}
static size_t tcp_size(int w)
{
    (void)w;
    return 0;
}
static int tcp_send(int w, const struct cadre_p2p_hdr *h, const void *p)
{
    (void)w, (void)h, (void)p;
    return CADRE_ERR_UNSUPPORTED;
}
static int tcp_progress(void)
{
    return 0;
}
static void tcp_finalize(void)
{
}
const struct cadre_p2p_transport cadre__p2p_tcp = {
    .name = "tcp", .init = tcp_init, .wireup = tcp_none, .reachable = tcp_reachable,
    .max_payload = tcp_size, .send = tcp_send, .progress = tcp_progress, .finalize = tcp_finalize,
};
