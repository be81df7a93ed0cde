/* A stand-in for libucp (CADRE_UCX_LIB) for the ucx suite: linked with the
 * real libucp, whose functions cadre's dlsym finds through it, it changes
 * some of them as UCPSHIM says (a comma list):
 *   rdma       ucp_context_print_info lists an RDMA resource, rc_verbs on
 *              mlx5_0, after UCX's own: "UCX offers an RDMA transport"
 *              holds on this machine, which has none;
 *   fail_init  ucp_init_version fails (UCS_ERR_NO_DEVICE), on the ranks
 *              of UCPSHIM_RANKS only where that is set (a comma list of
 *              CADRE_RANK values);
 *   cuda       ucp_context_query says the context takes CUDA memory
 *              (UCS_MEMORY_TYPE_CUDA), as a UCX built with CUDA does: the
 *              device-buffer decision's other branch (only the decision:
 *              no device buffer goes to this UCX);
 *   fail_ep    ucp_ep_create fails (UCS_ERR_UNREACHABLE: no common
 *              transport), on the ranks of UCPSHIM_RANKS likewise.
 * Test-only: never installed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

/* A reference to libucp, so that the link keeps it as a dependency (where
 * the linker drops unreferenced ones: --as-needed): cadre's dlsym on this
 * library finds the rest of UCP there. */
__attribute__((used)) static const void *const need_libucp = (const void *)&ucp_config_read;

static int wants(const char *mode)
{
    const char *m = getenv("UCPSHIM");
    char list[256], item[64];
    snprintf(list, sizeof list, ",%s,", m ? m : "");
    snprintf(item, sizeof item, ",%s,", mode);
    return strstr(list, item) != NULL;
}

static int this_rank_fails(void)
{
    const char *ranks = getenv("UCPSHIM_RANKS"), *r = getenv("CADRE_RANK");
    if (!ranks)
        return 1;
    char list[256], item[64];
    snprintf(list, sizeof list, ",%s,", ranks);
    snprintf(item, sizeof item, ",%s,", r ? r : "?");
    return strstr(list, item) != NULL;
}

ucs_status_t ucp_init_version(unsigned api_major_version, unsigned api_minor_version,
                              const ucp_params_t *params, const ucp_config_t *config,
                              ucp_context_h *context_p)
{
    if (wants("fail_init") && this_rank_fails())
        return UCS_ERR_NO_DEVICE;
    __typeof__(&ucp_init_version) real =
        (__typeof__(&ucp_init_version))dlsym(RTLD_NEXT, "ucp_init_version");
    return real(api_major_version, api_minor_version, params, config, context_p);
}

void ucp_context_print_info(const ucp_context_h context, FILE *stream)
{
    __typeof__(&ucp_context_print_info) real =
        (__typeof__(&ucp_context_print_info))dlsym(RTLD_NEXT, "ucp_context_print_info");
    real(context, stream);
    if (wants("rdma"))
        fprintf(stream, "#      resource 99 :  md 9  dev 9  flags -- rc_verbs/mlx5_0:1\n");
}

ucs_status_t ucp_context_query(ucp_context_h context, ucp_context_attr_t *attr)
{
    __typeof__(&ucp_context_query) real =
        (__typeof__(&ucp_context_query))dlsym(RTLD_NEXT, "ucp_context_query");
    ucs_status_t s = real(context, attr);
    if (s == UCS_OK && wants("cuda") && (attr->field_mask & UCP_ATTR_FIELD_MEMORY_TYPES))
        attr->memory_types |= UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    return s;
}

ucs_status_t ucp_ep_create(ucp_worker_h worker, const ucp_ep_params_t *params, ucp_ep_h *ep_p)
{
    if (wants("fail_ep") && this_rank_fails())
        return UCS_ERR_UNREACHABLE;
    __typeof__(&ucp_ep_create) real = (__typeof__(&ucp_ep_create))dlsym(RTLD_NEXT,
                                                                        "ucp_ep_create");
    return real(worker, params, ep_p);
}
